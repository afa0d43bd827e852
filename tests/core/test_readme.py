"""The README cannot drift from the code: settings table, plugin switches, hook reference.

In the spirit of datasette's ``tests/test_docs.py``: a new setting, hook or hook
argument fails here until the README documents it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pluggy
import pytest

from trainkit_core import hookspecs
from trainkit_core.hookspecs import Capabilities
from trainkit_core.settings import settings_table

START = re.compile(r"<!-- settings-table:start.*?-->\n")
END = "<!-- settings-table:end -->"


@pytest.fixture
def readme(repo_root: Path) -> str:
    return (repo_root / "README.md").read_text()


def section(readme: str, title: str) -> str:
    """The text of `## title`, up to the next second-level heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    assert match, f"README has no section '## {title}'"
    return match.group(1)


def expected_settings_table() -> str:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for variable, default, meaning in settings_table():
        shown = default if default.startswith("(") or " " in default else f"`{default}`"
        rows.append(f"| `{variable}` | {shown} | {meaning} |")
    return "\n".join(rows) + "\n"


def test_settings_table_matches_the_code(readme: str) -> None:
    start = START.search(readme)
    assert start and END in readme, "README lost its settings-table markers"
    documented = readme[start.end() : readme.index(END)]
    expected = expected_settings_table()
    assert documented == expected, f"README settings table is stale; replace it with:\n{expected}"


def test_plugin_switches_are_documented(readme: str) -> None:
    text = section(readme, "Settings")
    for switch in ("TRAINKIT_LOAD_PLUGINS", "TRAINKIT_DISABLE_PLUGINS", "TRAINKIT_TRACE_PLUGINS"):
        assert f"`{switch}" in text, f"{switch} is not documented"


def hook_specs() -> dict[str, tuple[str, ...]]:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    specs = {}
    for name in dir(pm.hook):
        caller = getattr(pm.hook, name)
        if isinstance(caller, pluggy.HookCaller) and caller.spec is not None:
            specs[name] = tuple(caller.spec.argnames)
    return specs


def test_every_hook_and_argument_is_documented(readme: str) -> None:
    text = section(readme, "Writing a provider")
    documented = dict(
        (m.group(1), tuple(a.strip() for a in m.group(2).split(",") if a.strip()))
        for m in re.finditer(r"^### `(\w+)\(([^)]*)\)`", text, re.M)
    )
    specs = hook_specs()
    assert specs, "no hook specs found"
    for name, args in specs.items():
        assert name in documented, f"hook {name} is missing from README 'Writing a provider'"
        assert documented[name] == args, f"README documents {name}{documented[name]}, the spec has {name}{args}"
    stale = set(documented) - set(specs)
    assert not stale, f"README documents hooks that do not exist: {sorted(stale)}"


def test_every_capability_is_documented(readme: str) -> None:
    text = section(readme, "Writing a provider")
    for capability in Capabilities.__dataclass_fields__:
        assert f"`{capability}`" in text, f"capability {capability} is missing from README 'Writing a provider'"
