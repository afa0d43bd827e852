"""The documentation cannot drift from the code, and its examples run.

In the spirit of datasette's ``tests/test_docs.py`` and llm's runnable docs: a new
setting or route fails here until its generated page is regenerated; a hook, one of
its arguments or a capability missing from the provider guide fails; a `trainkit`
command or option in any page that the CLI does not have fails; every example parses,
and the first tutorial's examples run (`test_first_tutorial_runs`, in the `ml` session:
it trains the tiny model).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pluggy
import pytest

from trainkit_core.plugins import hookspecs
from trainkit_core.plugins.hookspecs import Capabilities

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: The kinds of example a page may hold; every fenced block of a tutorial is marked with one.
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```(\w*)\n(.*?)\n```", re.S)
FENCE = re.compile(r"^```(\w*)\n(.*?)\n^```", re.M | re.S)
#: What each marker means: run here (in order, by the tutorial test), or only parsed.
MARKERS = {
    "runs": "run in order by test_first_tutorial_runs and tests/docs/test_tutorials.py",
    "setup": "installs (the test environment already has it); parsed only",
    "needs-modal": "needs a Modal account; parsed only",
    "fake-modal": "needs a Modal account; run in order against the fake Modal SDK by tests/docs/test_tutorials.py",
    "needs-gpu": "needs a CUDA GPU; parsed only",
    "needs-run": "needs a run id of your own; parsed only",
    "needs-clone": "runs the whole suite or demo; parsed only",
    "needs-server": "talks to a running `trainkit serve`; parsed only (tests/api/test_fine_tuning_ml.py makes the same calls)",
    "long-run": "trains for minutes on a CPU, or needs what such a run made; parsed only (figures in the developer records)",
    "data": "a file's contents (a data format sample), not a command; shown only",
}


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def docs_reference():
    """scripts/docs_reference.py as a module (it is a script, not part of a package)."""
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- generated pages


def test_generated_pages_match_the_code() -> None:
    stale = docs_reference().stale_pages()
    assert not stale, "stale generated pages; run `python scripts/docs_reference.py`:\n" + "\n".join(stale.values())


def test_check_mode_fails_on_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = docs_reference()
    reference = tmp_path / "reference"
    shutil.copytree(DOCS / "reference", reference)
    monkeypatch.setattr(module, "REFERENCE", reference)
    assert module.main(["--check"]) == 0
    settings = reference / "settings.md"
    settings.write_text(settings.read_text().replace("`TRAINKIT_TRAIN_TIMEOUT_S`", "`TRAINKIT_TRAIN_TIMEOUT`"))
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0  # regenerates
    assert module.main(["--check"]) == 0


def test_settings_page_lists_every_setting() -> None:
    from trainkit_core.settings import settings_table

    text = (DOCS / "reference" / "settings.md").read_text()
    for variable, _, _ in settings_table():
        assert f"| `{variable}` |" in text, f"{variable} is missing from docs/reference/settings.md"


def test_the_cli_page_hook_shows_placeholders_and_defaults() -> None:
    """scripts/docs_hooks.py: what mkdocs-click renders wrongly, fixed on the CLI page only."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec and spec.loader
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)

    class Page:
        def __init__(self, uri: str) -> None:
            self.file = type("File", (), {"src_uri": uri})()

    html = (
        "<p>trained/<run id>/checkpoints/<step></p>\n<tr>\n<td><code>--json</code></td>\n<td>boolean</td>\n"
        "<td>Print JSON.</td>\n<td><code>Sentinel.UNSET</code></td>\n</tr>\n<tr>\n<td><code>--host</code></td>\n"
        "<td>text</td>\n<td>Address.</td>\n<td><code>Sentinel.UNSET</code></td>\n</tr>"
    )
    fixed = hooks.on_page_content(html, page=Page("reference/cli.md"))
    assert "trained/&lt;run id&gt;/checkpoints/&lt;step&gt;" in fixed
    assert "Sentinel" not in fixed
    assert "<td>Print JSON.</td>\n<td><code>False</code></td>" in fixed
    assert "<td>Address.</td>\n<td><code>None</code></td>" in fixed
    assert hooks.on_page_content(html, page=Page("reference/settings.md")) == html


# --------------------------------------------------------------------------- the provider guide


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section '## {title}'"
    return match.group(1)


def hook_specs() -> dict[str, tuple[str, ...]]:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    specs = {}
    for name in dir(pm.hook):
        caller = getattr(pm.hook, name)
        if isinstance(caller, pluggy.HookCaller) and caller.spec is not None:
            specs[name] = tuple(caller.spec.argnames)
    return specs


def test_every_hook_and_argument_is_in_the_provider_guide() -> None:
    text = section((DOCS / "how-to" / "write-a-provider.md").read_text(), "The hooks")
    documented = {
        m.group(1): tuple(a.strip() for a in m.group(2).split(",") if a.strip())
        for m in re.finditer(r"^### `(\w+)\(([^)]*)\)`", text, re.M)
    }
    specs = hook_specs()
    assert specs, "no hook specs found"
    for name, args in specs.items():
        assert name in documented, f"hook {name} is missing from the provider guide's 'The hooks'"
        assert documented[name] == args, f"the guide documents {name}{documented[name]}, the spec has {name}{args}"
    stale = set(documented) - set(specs)
    assert not stale, f"the guide documents hooks that do not exist: {sorted(stale)}"


def test_every_capability_is_documented() -> None:
    for page in ("how-to/write-a-provider.md", "concepts/providers.md"):
        text = (DOCS / page).read_text()
        for capability in Capabilities.__dataclass_fields__:
            assert f"`{capability}`" in text, f"capability {capability} is missing from docs/{page}"


def test_the_guide_answers_what_a_provider_author_asked() -> None:
    """The gaps a plugin author met writing a Ray provider from the README alone."""
    from trainkit_core.plugins.hookspecs import FunctionRunner, KVStore, RunHandle
    from trainkit_core.testing import ProviderContract

    text = (DOCS / "how-to" / "write-a-provider.md").read_text()
    for attribute in RunHandle.__annotations__:  # call_id, function
        assert f"`{attribute}`" in text, f"RunHandle.{attribute} is not described"
    assert "spawn(function, kwargs)" in text and "spawn(function, **kwargs)" in text
    assert list(FunctionRunner.spawn.__code__.co_varnames[1:3]) == ["function", "kwargs"]
    for option in ("make_settings", "volume_root", "large_file_mb", "keeps_logs", "cancel_settle_s", "plugin_env"):
        assert hasattr(ProviderContract, option), option
        assert f"| `{option}" in text, f"the contract option {option} is not described in a table row"
    for method in ("put_many", "get_many", "get_many_text"):
        assert not hasattr(KVStore, method), f"{method} is in the protocol now; the guide calls it optional"
        assert f"`{method}(" in text, f"the optional KVStore.{method} is not typed in the guide"
    assert "TRAINKIT_TRAIN_TIMEOUT_S" in text and "TRAINKIT_PRICES_FILE" in text


def test_plugin_switches_are_documented() -> None:
    """Every `TRAINKIT_*` variable `trainkit_core.plugins.manager` reads is on the providers page."""
    import inspect

    from trainkit_core.plugins import manager as plugins

    read = set(re.findall(r'"(TRAINKIT_[A-Z_]+)"', inspect.getsource(plugins)))
    assert {"TRAINKIT_LOAD_PLUGINS", "TRAINKIT_DISABLE_PLUGINS", "TRAINKIT_TRACE_PLUGINS"} <= read
    text = (DOCS / "concepts" / "providers.md").read_text()
    for switch in sorted(read):
        assert f"`{switch}" in text, (
            f"{switch} (trainkit_core.plugins.manager) is not documented in concepts/providers.md"
        )


def test_the_web_api_guide_lists_exactly_the_routes_of_the_schema() -> None:
    def route(method: str, path: str) -> tuple[str, str]:
        return method.upper(), re.sub(r"\{[^}]*\}", "{}", path.split("?")[0])

    schema = docs_reference().openapi_schema()
    # Deprecated twins (`/v1/jobs/...`) are named once under the table, not listed route by route.
    served = {
        route(m, path) for path, ops in schema["paths"].items() for m, op in ops.items() if not op.get("deprecated")
    }
    text = (DOCS / "how-to" / "web-api.md").read_text()
    listed = {route(m, p) for m, p in re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`", text, re.M)}
    assert not served - listed, f"routes missing from the how-to's table: {sorted(served - listed)}"
    assert not listed - served, f"the how-to lists routes the API does not have: {sorted(listed - served)}"


# --------------------------------------------------------------------------- the README


def test_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 250, "README.md is over 250 lines: move the detail to a page under docs/"
    links = re.findall(r"\]\(((?:docs|packages)/[^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"
    # One click each for a newcomer.
    for page in ("docs/tutorials/modal.md", "docs/reference/dataset-format.md", "docs/how-to/write-a-provider.md"):
        assert f"]({page})" in text, f"README does not link to {page}"


def test_each_package_readme_installs_and_links_to_the_site() -> None:
    site = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert site, "mkdocs.yml has no site_url"
    for readme in sorted((ROOT / "packages").glob("*/README.md")):
        text = readme.read_text()
        name = readme.parent.name
        assert text.startswith(f"# {name}\n"), f"{name}/README.md does not start with the package's name"
        assert "pip install" in text, f"{name}/README.md does not say how to install it"
        assert f"({site.group(1)}" in text, f"{name}/README.md does not link to the site ({site.group(1)})"


# --------------------------------------------------------------------------- CLI in the pages


def command_lines(text: str) -> list[str]:
    """Lines of fenced code that call `trainkit`, without a prompt or a `$(…)` around them."""
    found = []
    for _, body in FENCE.findall(text):
        for line in body.splitlines():
            line = line.strip().removeprefix("$ ")
            match = re.search(r"(?:^|\$\(|&& )(trainkit(?: [^)&]*)?)", line)
            if match and not line.startswith("#"):
                found.append(match.group(1).split(" #")[0].strip())
    return found


def check_command(root: click.Group, line: str) -> str | None:
    """Why `line` is not a command line of `root`, or None when it is.

    Synopses count too: `[--json]` is checked as `--json`, `<run id>` is a value, and
    `list|show` checks each of the alternatives.
    """
    line = re.sub(r"<[^>]*>", "X", line).replace("[", "").replace("]", "").replace("…", "X")
    try:
        words = shlex.split(line)[1:]
    except ValueError:
        return f"cannot split {line!r} into words"
    command: click.Command = root
    options = {o for p in root.params for o in getattr(p, "opts", [])}
    while words:
        word = words.pop(0)
        if word.startswith("--"):
            name = word.split("=", 1)[0]
            known = options | {o for p in command.params for o in getattr(p, "opts", [])} | {"--help"}
            if name not in known:
                return f"`{command.name}` has no option {name}"
            continue
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            missing = [w for w in word.split("|") if command.get_command(ctx, w) is None]
            if missing:
                return f"`{command.name}` has no command {missing[0]!r}"
            if "|" in word:
                return None  # alternatives: the options after them belong to several commands
            command = command.get_command(ctx, word)  # type: ignore[assignment]
    return None


def test_every_documented_command_and_option_exists() -> None:
    from trainkit_cli.main import build_cli

    cli = build_cli()
    problems = []
    for path in [README, *pages()]:
        for line in command_lines(path.read_text()):
            why = check_command(cli, line)
            if why:
                problems.append(f"{path.relative_to(ROOT)}: {line}: {why}")
    assert not problems, "\n".join(problems)


def test_the_command_check_catches_a_wrong_one() -> None:
    from trainkit_cli.main import build_cli

    cli = build_cli()
    assert check_command(cli, "trainkit train --dataset demo --steps 3") is None
    assert "no option --stepz" in (check_command(cli, "trainkit train --dataset demo --stepz 3") or "")
    assert "no command 'trian'" in (check_command(cli, "trainkit trian --dataset demo") or "")
    assert check_command(cli, "trainkit runs show <run id> [--json]") is None
    assert "no option --jsn" in (check_command(cli, "trainkit runs show ID [--jsn]") or "")
    assert "no command 'shw'" in (check_command(cli, "trainkit runs list|shw") or "")


# --------------------------------------------------------------------------- examples


def test_every_tutorial_example_is_marked() -> None:
    for path in sorted((DOCS / "tutorials").glob("*.md")):
        text = path.read_text()
        fences = len(FENCE.findall(text))
        examples = EXAMPLE.findall(text)
        assert fences == len(examples), f"{path.name}: {fences - len(examples)} code block(s) without an example marker"
        for marker, _, _ in examples:
            assert marker in MARKERS, f"{path.name}: unknown example marker {marker!r}; known: {sorted(MARKERS)}"


def test_every_example_parses(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash
    for path in [README, *pages()]:
        for language, body in FENCE.findall(path.read_text()):
            where = f"{path.relative_to(ROOT)}: {body.splitlines()[0][:60]!r}"
            if language == "python":
                compile(body, where, "exec")
            elif language in ("bash", "sh"):
                script = tmp_path / "example.sh"
                script.write_text(body + "\n")
                done = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True)
                assert done.returncode == 0, f"{where}: {done.stderr}"


def tutorial_script(path: Path, markers: tuple[str, ...] = ("runs",)) -> str:
    """The page's examples of `markers` as one bash script, Python blocks through the test's Python."""
    parts = ["set -euo pipefail"]
    for marker, language, body in EXAMPLE.findall(path.read_text()):
        if marker not in markers:
            continue
        if language == "python":
            parts.append(f"\"$PYTHON\" - <<'PYTHON_EXAMPLE'\n{body}\nPYTHON_EXAMPLE")
        else:
            parts.append(body)
    return "\n".join(parts) + "\n"


def run_tutorial(
    page: Path,
    folder: Path,
    *,
    timeout: int = 900,
    markers: tuple[str, ...] = ("runs",),
    env: dict[str, str] | None = None,
) -> str:
    """Run the page's `runs` blocks in order in one shell in `folder`; their output (fails, showing its end, on a non-zero exit)."""
    env = {
        **os.environ,
        **(env or {}),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHON": sys.executable,
        "OMP_NUM_THREADS": "1",
        "NO_COLOR": "1",
    }
    script = folder / "tutorial.sh"
    script.write_text(tutorial_script(page, markers))
    done = subprocess.run(["bash", str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return output


@pytest.mark.ml
@pytest.mark.e2e
def test_first_tutorial_runs(tmp_path: Path, trainkit_home: Path) -> None:
    """Every `runs` example of the first tutorial, in order, in one shell, from a copy of the demo data."""
    shutil.copytree(ROOT / "datasets" / "demo", tmp_path / "datasets" / "demo")
    output = run_tutorial(DOCS / "tutorials" / "first-fine-tune.md", tmp_path, timeout=600)
    assert "succeeded" in output, output[-4000:]
    assert "exact" in output.lower(), "the eval table was not printed"
    assert re.search(r"trained/run-\S+: \d+ tokens", output), "infer did not answer with the tuned model"
    assert re.search(r"trained/run-\S+ \(base\): \d+ tokens", output), "infer did not answer with the base"
