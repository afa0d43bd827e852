"""Finding and loading provider plugins.

Plugins come from the entry-point group ``trainkit``, the built-in `local` provider
included, so the path a third party takes is the path the project uses. Three
switches help when a plugin misbehaves:

- ``TRAINKIT_LOAD_PLUGINS=a,b``: load only these entry points (allow-list; empty
  string loads none);
- ``TRAINKIT_DISABLE_PLUGINS=a,b``: skip these (deny-list);
- ``TRAINKIT_TRACE_PLUGINS=1``: print every hook call and its answer to stderr.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

from trainkit_core import hookspecs
from trainkit_core.errors import PluginLoadError

if sys.version_info >= (3, 12):
    from importlib.metadata import entry_points
else:  # pragma: no cover - exercised on 3.10/3.11
    from importlib_metadata import entry_points

ENTRY_POINT_GROUP = "trainkit"


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin: its entry point and the distribution that ships it."""

    name: str
    module: str
    package: str
    version: str
    hooks: tuple[str, ...] = field(default_factory=tuple)


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
    print(f"trainkit: hook {hook_name} -> {result}", file=sys.stderr)


def build_plugin_manager(*, load_entry_points: bool = True) -> pluggy.PluginManager:
    """A new plugin manager with trainkit's hook specs and the installed plugins.

    Raises `PluginLoadError` naming the plugin when one fails to import.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.trainkit_plugin_info = {}  # type: ignore[attr-defined]
    if load_entry_points:
        allow = _names_from_env("TRAINKIT_LOAD_PLUGINS")
        deny = _names_from_env("TRAINKIT_DISABLE_PLUGINS") or set()
        seen: set[str] = set()
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in seen or ep.name in deny or (allow is not None and ep.name not in allow):
                continue
            seen.add(ep.name)
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginLoadError(
                    f'error importing plugin "{ep.name}" ({ep.value}): {type(exc).__name__}: {exc}',
                    hint=f"reinstall the package that provides it, or set TRAINKIT_DISABLE_PLUGINS={ep.name}",
                ) from exc
            register(pm, plugin, name=ep.name, module=ep.value, dist=ep.dist)
    check_pending(pm)
    if os.environ.get("TRAINKIT_TRACE_PLUGINS", "") not in ("", "0"):
        pm.add_hookcall_monitoring(_trace, _trace_after)
    return pm


def check_pending(pm: pluggy.PluginManager) -> None:
    """Refuse a hook implementation that matches no spec (a misspelt hook name).

    Raises `PluginLoadError` naming the plugin and the hook.
    """
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginLoadError(
            f'plugin "{pm.get_name(exc.plugin) or exc.plugin}" is invalid: {exc}',
            hint="a hook name is misspelt or not a trainkit hook; see trainkit_core.hookspecs",
        ) from exc


def register(pm: pluggy.PluginManager, plugin: object, *, name: str, module: str = "", dist: Any = None) -> None:
    """Register one plugin object and remember where it came from (for `trainkit providers`).

    Raises `PluginLoadError` naming the plugin when a hook implementation does not
    fit its spec (e.g. an argument the spec does not have).
    """
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        raise PluginLoadError(
            f'plugin "{name}" is invalid: {exc}',
            hint="compare its hook implementations with trainkit_core.hookspecs",
        ) from exc
    hooks = tuple(sorted(impl.name for impl in (pm.get_hookcallers(plugin) or [])))
    info = PluginInfo(
        name=name,
        module=module or getattr(plugin, "__name__", type(plugin).__name__),
        package=getattr(dist, "name", None) or getattr(dist, "metadata", {}).get("Name", "") if dist else "",
        version=getattr(dist, "version", "") if dist else "",
        hooks=hooks,
    )
    pm.trainkit_plugin_info[name] = info  # type: ignore[attr-defined]


def plugin_info(pm: pluggy.PluginManager) -> dict[str, PluginInfo]:
    return dict(getattr(pm, "trainkit_plugin_info", {}))


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
