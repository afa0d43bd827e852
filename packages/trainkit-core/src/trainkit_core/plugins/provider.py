"""The provider facade: one object per provider, so consumers never touch `pm.hook`.

The facade is also where a plugin's answers are checked. Each hook is asked of the
plugin that declared the provider first (then of the others, in pluggy's order), one
plugin at a time, so an answer is always tied to the plugin that gave it: an answer
that does not follow its protocol, an exception that is not trainkit's own, and
``None`` from the provider's own plugin are all reported naming the plugin and the
hook, instead of surfacing as a traceback far away in whatever used the answer.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

from trainkit_core.errors import NotFoundError, ProviderError, TrainkitError, UsageError
from trainkit_core.plugins.hookspecs import (
    Capabilities,
    Deployment,
    FunctionRunner,
    InferenceServer,
    KVStore,
    ProviderManifest,
    RunHandle,
    Volume,
)
from trainkit_core.plugins.manager import (
    PluginInfo,
    broken_error,
    debug_enabled,
    disabled_plugins,
    get_plugin_manager,
    plugin_info,
)

if TYPE_CHECKING:
    from trainkit_core.settings import Settings

#: The protocol each hook's answer must follow.
HOOK_PROTOCOLS: dict[str, type] = {
    "volume": Volume,
    "kv_store": KVStore,
    "run_function": FunctionRunner,
    "provision": Deployment,
    "inference_server": InferenceServer,
}


@functools.cache
def protocol_members(protocol: type) -> tuple[str, ...]:
    """The attributes and methods a protocol requires (what `isinstance` checks)."""
    names = list(getattr(protocol, "__annotations__", {}))
    names += [n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")]
    return tuple(names)


def check_answer(answer: Any, protocol: type, *, plugin: str, hook: str, provider: str) -> Any:
    """`answer`, or `ProviderError` naming the plugin, the hook and what the answer lacks.

    The same test as ``isinstance(answer, protocol)`` for a runtime-checkable protocol
    (every member present), without its cost on each call through the facade.
    """
    missing = [n for n in protocol_members(protocol) if not hasattr(answer, n)]
    if not missing:
        return answer
    lacks = f" (it lacks {', '.join(missing)})" if missing else ""
    raise ProviderError(
        f"plugin {plugin!r} answered the {hook!r} hook for provider {provider!r} with"
        f" {type(answer).__name__}, not a {protocol.__name__}{lacks}",
        hint=f"the plugin is at fault: its {hook} hook must return a {protocol.__name__}"
        " (see trainkit_core.plugins.hookspecs); report it to its authors",
    )


@dataclass(frozen=True)
class ProviderInfo:
    """A provider as `trainkit providers` lists it; `error` is set when its plugin is broken."""

    name: str
    description: str
    capabilities: Capabilities
    plugin: PluginInfo | None
    error: str = ""
    settings: list[tuple[str, str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": "broken" if self.error else "ok",
            "error": self.error,
            "description": self.description,
            "package": self.plugin.package if self.plugin else "",
            "version": self.plugin.version if self.plugin else "",
            "module": self.plugin.module if self.plugin else "",
            "hooks": list(self.plugin.hooks) if self.plugin else [],
            "capabilities": self.capabilities.as_dict(),
            "settings": [{"variable": v, "default": d, "meaning": m} for v, d, m in self.settings],
        }


def _scan(pm: pluggy.PluginManager) -> tuple[dict[str, tuple[ProviderManifest, str | None]], dict[str, PluginInfo]]:
    """(provider name -> (manifest, declaring plugin), plugin name -> broken plugin).

    Each plugin is asked through its own subset of the hook, so the answer is tied to
    the plugin and the call still shows in ``TRAINKIT_TRACE_PLUGINS`` output. A plugin
    whose manifest raises or is of the wrong type is broken, not fatal to the others.
    """
    found: dict[str, tuple[ProviderManifest, str | None]] = {}
    infos = plugin_info(pm)
    broken = {name: info for name, info in infos.items() if info.broken}
    plugins = pm.get_plugins()
    for impl in reversed(pm.hook.provider_manifest.get_hookimpls()):
        others = [p for p in plugins if p is not impl.plugin]
        name = impl.plugin_name
        try:
            answers = pm.subset_hook_caller("provider_manifest", remove_plugins=others)()
            manifests = [m for answer in answers for m in (answer if isinstance(answer, list) else [answer])]
            for manifest in manifests:
                if not isinstance(manifest, ProviderManifest):
                    raise ProviderError(
                        f"plugin {name!r} answered provider_manifest with {type(manifest).__name__},"
                        " not a ProviderManifest"
                    )
        except Exception as exc:
            base = infos.get(name) or PluginInfo(name=name, module="", package="", version="")
            message = exc.message if isinstance(exc, TrainkitError) else f"{type(exc).__name__}: {exc}"
            broken[name] = PluginInfo(
                **{
                    **base.__dict__,
                    "error": f"provider_manifest failed: {message}",
                    "traceback": traceback.format_exc(),
                }
            )
            continue
        for manifest in manifests:
            if manifest.name not in found:
                found[manifest.name] = (manifest, name)
    return found, broken


def list_providers(pm: pluggy.PluginManager | None = None) -> list[ProviderInfo]:
    """Every installed provider, sorted by name; broken plugins are listed with their error."""
    pm = pm or get_plugin_manager()
    infos = plugin_info(pm)
    found, broken = _scan(pm)
    listed = [
        ProviderInfo(
            name,
            manifest.description,
            manifest.capabilities,
            infos.get(plugin_name or ""),
            settings=_settings_rows(getattr(infos.get(plugin_name or ""), "settings", None)),
        )
        for name, (manifest, plugin_name) in found.items()
    ]
    listed += [
        ProviderInfo(name, "", Capabilities(), info, error=info.error)
        for name, info in broken.items()
        if name not in found
    ]
    return sorted(listed, key=lambda p: p.name)


def _settings_rows(model: Any) -> list[tuple[str, str, str]]:
    """A plugin's settings rows; settings are imported only for a plugin that has a model,
    so listing plain providers reads no settings."""
    if model is None:
        return []
    from trainkit_core.settings import settings_rows

    return settings_rows(model)


class Provider:
    """One provider, with one method per hook. Get it with `get_provider(name)`.

    Every answer is checked against its protocol (`HOOK_PROTOCOLS`); `ProviderError`
    names the plugin and the hook when one is wrong.
    """

    def __init__(
        self, pm: pluggy.PluginManager, manifest: ProviderManifest, settings: Settings, plugin: str | None = None
    ) -> None:
        self._pm = pm
        self.manifest = manifest
        self.settings = settings
        #: The plugin that declared this provider (asked first).
        self.plugin = plugin
        self._caller_cache: dict[str, tuple[tuple[int, ...], list[tuple[str, Any]]]] = {}

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def capabilities(self) -> Capabilities:
        return self.manifest.capabilities

    def __repr__(self) -> str:
        return f"<Provider {self.name}>"

    def _callers(self, hook: str) -> list[tuple[str, Any]]:
        """(plugin name, a caller of that plugin's implementation alone), ours first.

        Kept while the hook's implementations stay the same (they change only when a
        plugin is registered or unregistered).
        """
        caller = getattr(self._pm.hook, hook, None)
        impls = list(reversed(caller.get_hookimpls())) if caller is not None else []
        key = tuple(id(impl.plugin) for impl in impls)
        cached = self._caller_cache.get(hook)
        if cached is None or cached[0] != key:
            impls.sort(key=lambda impl: impl.plugin_name != self.plugin)  # stable: ours first
            plugins = self._pm.get_plugins()
            callers = [
                (impl.plugin_name, self._pm.subset_hook_caller(hook, [p for p in plugins if p is not impl.plugin]))
                for impl in impls
            ]
            cached = self._caller_cache[hook] = (key, callers)
        return cached[1]

    def _ask(self, hook: str, **kwargs: Any) -> tuple[Any, str | None]:
        """The first non-None answer and the plugin that gave it, asking our plugin first."""
        for plugin_name, one in self._callers(hook):
            try:
                answer = one(provider=self.name, settings=self.settings, **kwargs)
            except TrainkitError:
                raise
            except Exception as exc:
                detail = "\n" + traceback.format_exc().rstrip() if debug_enabled() else ""
                raise ProviderError(
                    f"plugin {plugin_name!r} failed in the {hook!r} hook for provider {self.name!r}:"
                    f" {type(exc).__name__}: {exc}{detail}",
                    hint=f"TRAINKIT_DEBUG=1 shows the traceback; TRAINKIT_DISABLE_PLUGINS={plugin_name}"
                    " leaves the plugin out",
                ) from exc
            if answer is not None:
                return answer, plugin_name
        return None, None

    def _answer(self, hook: str, **kwargs: Any) -> Any:
        answer, plugin = self._ask(hook, **kwargs)
        if answer is None:
            own = plugin_info(self._pm).get(self.plugin or "")
            if own is not None and hook in own.hooks:
                raise ProviderError(
                    f"plugin {self.plugin!r} answered None to the {hook!r} hook for its own provider {self.name!r}",
                    hint="a hook answers None only for other providers; the plugin is at fault",
                )
            raise ProviderError(f"provider {self.name!r} does not implement the {hook!r} hook")
        return check_answer(answer, HOOK_PROTOCOLS[hook], plugin=plugin or "?", hook=hook, provider=self.name)

    def volume(self, kind: str) -> Volume:
        """The volume of a kind (`data`, `models`, `eval`, `hf-cache`), by its configured name."""
        return self._answer("volume", name=self.settings.volumes.name_for(kind))  # type: ignore[no-any-return]

    def kv(self, namespace: str) -> KVStore:
        return self._answer("kv_store", namespace=namespace)  # type: ignore[no-any-return]

    def runner(self) -> FunctionRunner:
        return self._answer("run_function")  # type: ignore[no-any-return]

    def spawn(self, function: str, **kwargs: Any) -> RunHandle:
        """Start job `function` detached; the handle's `call_id` finds it again later.

        A runner whose `spawn` takes ``placement`` gets the job's `Placement` (GPU, memory,
        timeout: `trainkit_core.plugins.placement`), so it can place the job without trainkit's presets.
        """
        from trainkit_core.plugins.placement import placement_of

        placement = placement_of(self, function, kwargs)
        self.check_scale(placement.gpu_count, placement.nodes)
        runner = self.runner()
        if takes_placement(runner):
            handle = runner.spawn(function, kwargs, placement=placement)  # type: ignore[call-arg]
        else:
            handle = runner.spawn(function, kwargs)
        return check_answer(handle, RunHandle, plugin=self.plugin or "?", hook="run_function", provider=self.name)  # type: ignore[no-any-return]

    def check_scale(self, gpus: int, nodes: int) -> None:
        """`UsageError` naming what this provider can do when a job asks for more GPUs or nodes than it declares.

        Called before a run is recorded (`check_request`) and again by `spawn`, so a provider
        never starts part of a job it cannot finish. One GPU is what every job asked for before
        runs could ask for several, so it is never refused here (a CPU-only provider runs it on its CPU).
        """
        caps = self.capabilities
        if nodes > caps.max_nodes:
            raise UsageError(
                f"provider {self.name!r} runs a job on at most {caps.max_nodes} node(s); this one asks for {nodes}",
                hint=f"ask for --nodes {caps.max_nodes} or fewer, or use a provider that declares more (trainkit providers)",
            )
        if gpus > 1 and gpus > caps.max_gpus_per_node:
            if self.name == "local":
                hint = (
                    f"this machine shows {caps.max_gpus_per_node} GPU(s) to CUDA; --processes {gpus} runs the same "
                    "distributed code on CPU processes (gloo)"
                )
            else:
                hint = f"ask for --gpus {max(caps.max_gpus_per_node, 1)} or fewer, or use a provider that declares more"
            raise UsageError(
                f"provider {self.name!r} runs a job on at most {caps.max_gpus_per_node} GPU(s) per node; "
                f"this one asks for {gpus}",
                hint=hint,
            )

    def call(self, call_id: str) -> RunHandle:
        handle = self.runner().get(call_id)
        return check_answer(handle, RunHandle, plugin=self.plugin or "?", hook="run_function", provider=self.name)  # type: ignore[no-any-return]

    def deployment(self) -> Deployment:
        return self._answer("provision")  # type: ignore[no-any-return]

    def app_lifecycle(self) -> Deployment:
        """The deployment, for deploying, inspecting and stopping the provider's app.

        `UsageError` when the provider declares no `app_lifecycle` (local: nothing to
        deploy), so the CLI and the API refuse alike.
        """
        if not self.capabilities.app_lifecycle:
            raise UsageError(
                f"provider {self.name!r} has no app to deploy, inspect or stop",
                hint="choose a provider with an app lifecycle, e.g. --provider modal (see `trainkit providers`)",
            )
        return self.deployment()

    def inference_server(self) -> InferenceServer | None:
        """The provider's warm inference server, or None when it has none (use the infer job)."""
        answer, plugin = self._ask("inference_server")
        if answer is None:
            return None
        return check_answer(  # type: ignore[no-any-return]
            answer, InferenceServer, plugin=plugin or "?", hook="inference_server", provider=self.name
        )


def get_provider(
    name: str | None = None,
    settings: Settings | None = None,
    *,
    pm: pluggy.PluginManager | None = None,
) -> Provider:
    """The provider `name` (default: `settings.provider.provider`).

    Raises `NotFoundError` listing the installed providers when there is none of that
    name, `UsageError` when a switch disabled it, and `PluginLoadError` with the
    plugin's error when its plugin is broken.
    """
    if settings is None:
        from trainkit_core.settings import Settings

        settings = Settings.from_env()
    name = name or settings.provider.provider
    pm = pm or get_plugin_manager()
    manifests, broken = _scan(pm)
    if name not in manifests:
        if name in broken:
            raise broken_error(broken[name])
        disabled = disabled_plugins(pm)
        if name in disabled:
            variable = disabled[name]
            fix = "remove it from" if variable == "TRAINKIT_DISABLE_PLUGINS" else "add it to"
            raise UsageError(
                f"provider {name!r} is installed but disabled by {variable}",
                hint=f"{fix} {variable} to use it",
            )
        installed = ", ".join(sorted(manifests)) or "none"
        raise NotFoundError(
            f"unknown provider {name!r}; installed providers: {installed}",
            hint="install the provider's package (e.g. pip install trainkit-modal) or check TRAINKIT_PROVIDER",
        )
    manifest, plugin = manifests[name]
    info = plugin_info(pm).get(plugin or "")
    if info is not None and info.settings is not None:
        settings = settings.with_plugin_settings(info.settings)
    return Provider(pm, manifest, settings, plugin)


def call_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Check that job arguments are JSON-able, as every provider must ship them."""
    import json

    try:
        return json.loads(json.dumps(dict(kwargs)))  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise UsageError(f"job arguments must be JSON-serialisable: {exc}") from None


def takes_placement(runner: FunctionRunner) -> bool:
    """Whether a runner's `spawn` accepts the ``placement`` keyword (older runners do not)."""
    import inspect

    try:
        return "placement" in inspect.signature(runner.spawn).parameters
    except (TypeError, ValueError):
        return False
