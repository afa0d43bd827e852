"""Finding graders by name: the built-in ones, then the `trainkit.rewards` entry points.

A plugin is a distribution declaring, in its ``pyproject.toml``::

    [project.entry-points."trainkit.rewards"]
    polite = "my_graders:polite"     # grade(completion: str, example: Mapping) -> float

the same way providers are found (`trainkit_core.plugins.manager`). Names are checked on the
client before a run starts (`check_reward_names`, which reads the entry points without
importing them); the job loads them (`load_graders`), and an import failure names the
plugin.
"""

from __future__ import annotations

from typing import Any

from trainkit_core.errors import PluginLoadError, UsageError
from trainkit_core.rewards.builtin import BUILTIN_GRADERS, Grader

REWARDS_GROUP = "trainkit.rewards"


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=REWARDS_GROUP)}


def available_graders() -> list[str]:
    """Every grader name: the built-in ones, then the plugins'."""
    return [*BUILTIN_GRADERS, *sorted(set(_entry_points()) - set(BUILTIN_GRADERS))]


def check_reward_names(specs: list[str]) -> list[tuple[str, float]]:
    """(name, weight) per ``NAME[=WEIGHT]``; `UsageError` for a name no built-in or plugin provides."""
    from trainkit_core.rewards.reward_choice import parse_reward

    parsed = []
    plugins = _entry_points()
    for spec in specs:
        try:
            name, weight = parse_reward(spec)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if name not in BUILTIN_GRADERS and name not in plugins:
            raise UsageError(
                f"no grader named {name!r}; available: {', '.join(available_graders())}",
                hint=f"a plugin provides graders through the {REWARDS_GROUP!r} entry-point group",
            )
        parsed.append((name, weight))
    return parsed


def load_grader(name: str) -> Grader:
    """The grader `name` (built-in first); `PluginLoadError` naming a plugin that fails to import."""
    if name in BUILTIN_GRADERS:
        return BUILTIN_GRADERS[name]
    entry = _entry_points().get(name)
    if entry is None:
        raise UsageError(f"no grader named {name!r}; available: {', '.join(available_graders())}")
    try:
        grader = entry.load()
    except Exception as exc:
        raise PluginLoadError(
            f"grader plugin {name!r} ({entry.value}) failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    if not callable(grader):
        raise PluginLoadError(f"grader plugin {name!r} ({entry.value}) is not callable")
    return grader  # type: ignore[no-any-return]
