"""Finding and loading provider plugins.

Plugins come from the entry-point group ``trainkit``, the built-in `local` provider
included, so the path a third party takes is the path the project uses. A plugin that
fails to load (an import error, a misspelt hook, an argument its spec lacks) does not
take the others down: it is set aside as *broken* with its error, `trainkit providers`
lists it, and only a command that needs it fails. Four switches help when a plugin
misbehaves:

- ``TRAINKIT_LOAD_PLUGINS=a,b``: load only these entry points (allow-list; empty
  string loads none);
- ``TRAINKIT_DISABLE_PLUGINS=a,b``: skip these (deny-list);
- ``TRAINKIT_TRACE_PLUGINS=1``: print every hook call, its answer and the plugin that
  answered to stderr;
- ``TRAINKIT_DEBUG=1``: add the traceback to a broken plugin's error.

A name in the first two that no installed entry point has is warned about (a typo
there would otherwise silently load or skip the wrong plugin).
"""

from __future__ import annotations

import difflib
import logging
import os
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

from trainkit_core.errors import PluginLoadError
from trainkit_core.plugins import hookspecs

if sys.version_info >= (3, 12):
    from importlib.metadata import entry_points
else:  # pragma: no cover - exercised on 3.10/3.11
    from importlib_metadata import entry_points

ENTRY_POINT_GROUP = "trainkit"
#: The attribute a plugin (module or object) names its settings model with.
SETTINGS_ATTRIBUTE = "trainkit_settings"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PluginInfo:
    """A plugin: its entry point, the distribution that ships it, and why it is broken if it is.

    `error` is empty for a plugin that loaded; `settings` is the pydantic-settings model
    the plugin registered (`trainkit_settings` attribute), or None.
    """

    name: str
    module: str
    package: str
    version: str
    hooks: tuple[str, ...] = field(default_factory=tuple)
    error: str = ""
    traceback: str = ""
    settings: Any = None

    @property
    def broken(self) -> bool:
        return bool(self.error)


def debug_enabled() -> bool:
    """``TRAINKIT_DEBUG=1``: errors about plugins carry their traceback."""
    return os.environ.get("TRAINKIT_DEBUG", "") not in ("", "0")


def _names_from_env(variable: str) -> set[str] | None:
    raw = os.environ.get(variable)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _trace(hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    # Only argument names and plain strings: settings carry secrets.
    shown = ", ".join(f"{k}={v!r}" if isinstance(v, str) else k for k, v in kwargs.items())
    print(f"trainkit: hook {hook_name}({shown}) -> {len(hook_impls)} impl(s)", file=sys.stderr)


def _trace_after(outcome: Any, hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    exc = outcome.exception
    result = f"raised {type(exc).__name__}" if exc else type(outcome.get_result()).__name__
    # The facade asks one plugin at a time, so the one asked is the one that answered.
    by = f" from plugin {hook_impls[0].plugin_name!r}" if len(hook_impls) == 1 else ""
    print(f"trainkit: hook {hook_name} -> {result}{by}", file=sys.stderr)


def _dist_fields(dist: Any) -> tuple[str, str]:
    if not dist:
        return "", ""
    package = getattr(dist, "name", None) or getattr(dist, "metadata", {}).get("Name", "")
    return package, getattr(dist, "version", "") or ""


def build_plugin_manager(*, load_entry_points: bool = True) -> pluggy.PluginManager:
    """A new plugin manager with trainkit's hook specs and the installed plugins.

    Never raises for one plugin: a plugin that fails to load is recorded as broken
    (see `plugin_info`) and the others load. Names in the switches that match no
    entry point are warned about.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.trainkit_plugin_info = {}  # type: ignore[attr-defined]
    pm.trainkit_disabled = {}  # type: ignore[attr-defined]
    if load_entry_points:
        allow = _names_from_env("TRAINKIT_LOAD_PLUGINS")
        deny = _names_from_env("TRAINKIT_DISABLE_PLUGINS") or set()
        eps = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        known = {ep.name for ep in eps}
        for variable, names in (("TRAINKIT_LOAD_PLUGINS", allow or set()), ("TRAINKIT_DISABLE_PLUGINS", deny)):
            for unknown in sorted(names - known):
                close = difflib.get_close_matches(unknown, known, n=1)
                guess = f" (did you mean {close[0]!r}?)" if close else ""
                logger.warning(
                    "%s names %r, which no installed plugin is%s; installed: %s",
                    variable,
                    unknown,
                    guess,
                    ", ".join(sorted(known)) or "none",
                )
        seen: set[str] = set()
        for ep in eps:
            if ep.name in seen:
                continue
            seen.add(ep.name)
            if ep.name in deny:
                pm.trainkit_disabled[ep.name] = "TRAINKIT_DISABLE_PLUGINS"  # type: ignore[attr-defined]
                continue
            if allow is not None and ep.name not in allow:
                pm.trainkit_disabled[ep.name] = "TRAINKIT_LOAD_PLUGINS"  # type: ignore[attr-defined]
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                _record_broken(
                    pm,
                    ep.name,
                    ep.value,
                    ep.dist,
                    f'error importing plugin "{ep.name}" ({ep.value}): {type(exc).__name__}: {exc}',
                    traceback.format_exc(),
                )
                continue
            try:
                register(pm, plugin, name=ep.name, module=ep.value, dist=ep.dist)
            except PluginLoadError as exc:
                _record_broken(pm, ep.name, ep.value, ep.dist, exc.message, "")
    if os.environ.get("TRAINKIT_TRACE_PLUGINS", "") not in ("", "0"):
        pm.add_hookcall_monitoring(_trace, _trace_after)
    return pm


def _record_broken(pm: pluggy.PluginManager, name: str, module: str, dist: Any, error: str, tb: str) -> None:
    package, version = _dist_fields(dist)
    pm.trainkit_plugin_info[name] = PluginInfo(  # type: ignore[attr-defined]
        name=name, module=module, package=package, version=version, error=error, traceback=tb
    )


def _misspelt_hooks(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    """The hook implementations of `plugin` that match no spec, each with a suggestion."""
    specs = [
        name
        for name in dir(pm.hook)
        if isinstance(getattr(pm.hook, name), pluggy.HookCaller) and getattr(pm.hook, name).spec is not None
    ]
    problems = []
    for caller in pm.get_hookcallers(plugin) or []:
        if caller.spec is None:
            close = difflib.get_close_matches(caller.name, specs, n=1)
            problems.append(f"{caller.name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return problems


def check_pending(pm: pluggy.PluginManager) -> None:
    """Refuse a hook implementation that matches no spec (a misspelt hook name).

    Raises `PluginLoadError` naming the plugin and the hook, with the closest hook name.
    """
    for plugin in pm.get_plugins():
        problems = _misspelt_hooks(pm, plugin)
        if problems:
            name = pm.get_name(plugin) or repr(plugin)
            raise PluginLoadError(
                f'plugin "{name}" is invalid: unknown hook {", ".join(problems)}',
                hint="a hook name is misspelt or not a trainkit hook; see trainkit_core.plugins.hookspecs",
            )


def register(pm: pluggy.PluginManager, plugin: object, *, name: str, module: str = "", dist: Any = None) -> None:
    """Register one plugin object and remember where it came from (for `trainkit providers`).

    Raises `PluginLoadError` naming the plugin when a hook implementation does not fit
    its spec (an argument the spec does not have) or matches no spec (a misspelt hook
    name, with the closest one); the plugin is then not registered.
    """
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        raise PluginLoadError(
            f'plugin "{name}" is invalid: {exc}',
            hint="compare its hook implementations with trainkit_core.plugins.hookspecs",
        ) from exc
    problems = _misspelt_hooks(pm, plugin)
    if problems:
        pm.unregister(plugin)
        raise PluginLoadError(
            f'plugin "{name}" is invalid: unknown hook {", ".join(problems)}',
            hint=f"fix the hook name in {module or name}; the hooks are listed in trainkit_core.plugins.hookspecs",
        )
    hooks = tuple(sorted(impl.name for impl in (pm.get_hookcallers(plugin) or [])))
    package, version = _dist_fields(dist)
    info = PluginInfo(
        name=name,
        module=module or getattr(plugin, "__name__", type(plugin).__name__),
        package=package,
        version=version,
        hooks=hooks,
        settings=getattr(plugin, SETTINGS_ATTRIBUTE, None),
    )
    pm.trainkit_plugin_info[name] = info  # type: ignore[attr-defined]


def plugin_info(pm: pluggy.PluginManager) -> dict[str, PluginInfo]:
    """Every plugin by entry-point name, broken ones included (their `error` set)."""
    return dict(getattr(pm, "trainkit_plugin_info", {}))


def disabled_plugins(pm: pluggy.PluginManager) -> dict[str, str]:
    """Entry points not loaded because of a switch: name -> the variable that left it out."""
    return dict(getattr(pm, "trainkit_disabled", {}))


def broken_error(info: PluginInfo) -> PluginLoadError:
    """The error a command that needs a broken plugin fails with (traceback with ``TRAINKIT_DEBUG=1``)."""
    message = f'provider "{info.name}" is not available: {info.error}'
    if debug_enabled() and info.traceback:
        message += "\n" + info.traceback.rstrip()
    return PluginLoadError(
        message,
        hint=f"fix or reinstall the package that provides it, or set TRAINKIT_DISABLE_PLUGINS={info.name};"
        " TRAINKIT_DEBUG=1 shows the traceback",
    )


_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, built on first use."""
    global _manager
    with _lock:
        if _manager is None:
            _manager = build_plugin_manager()
        return _manager


def reset_plugin_manager() -> None:
    """Forget the process-wide plugin manager (tests; after changing the switches)."""
    global _manager
    with _lock:
        _manager = None
