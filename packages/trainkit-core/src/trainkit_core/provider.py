"""The provider facade: one object per provider, so consumers never touch `pm.hook`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

from trainkit_core.errors import NotFoundError, ProviderError, UsageError
from trainkit_core.hookspecs import (
    Capabilities,
    Deployment,
    FunctionRunner,
    InferenceServer,
    KVStore,
    ProviderManifest,
    RunHandle,
    Volume,
)
from trainkit_core.plugins import PluginInfo, get_plugin_manager, plugin_info

if TYPE_CHECKING:
    from trainkit_core.settings import Settings


@dataclass(frozen=True)
class ProviderInfo:
    """A provider as `trainkit providers` lists it."""

    name: str
    description: str
    capabilities: Capabilities
    plugin: PluginInfo | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "package": self.plugin.package if self.plugin else "",
            "version": self.plugin.version if self.plugin else "",
            "module": self.plugin.module if self.plugin else "",
            "hooks": list(self.plugin.hooks) if self.plugin else [],
            "capabilities": self.capabilities.as_dict(),
        }


def _manifests(pm: pluggy.PluginManager) -> dict[str, tuple[ProviderManifest, str | None]]:
    """Provider name -> (manifest, name of the plugin that declared it).

    Each plugin is asked through its own subset of the hook, so the answer can be
    tied to the plugin and the call still shows in ``TRAINKIT_TRACE_PLUGINS`` output.
    """
    found: dict[str, tuple[ProviderManifest, str | None]] = {}
    plugins = pm.get_plugins()
    for impl in reversed(pm.hook.provider_manifest.get_hookimpls()):
        others = [p for p in plugins if p is not impl.plugin]
        for answer in pm.subset_hook_caller("provider_manifest", remove_plugins=others)():
            for manifest in answer if isinstance(answer, list) else [answer]:
                if not isinstance(manifest, ProviderManifest):
                    raise ProviderError(
                        f"plugin {impl.plugin_name!r} answered provider_manifest with {type(manifest).__name__},"
                        " not a ProviderManifest"
                    )
                if manifest.name not in found:
                    found[manifest.name] = (manifest, impl.plugin_name)
    return found


def list_providers(pm: pluggy.PluginManager | None = None) -> list[ProviderInfo]:
    """Every installed provider, sorted by name."""
    pm = pm or get_plugin_manager()
    infos = plugin_info(pm)
    return [
        ProviderInfo(name, manifest.description, manifest.capabilities, infos.get(plugin_name or ""))
        for name, (manifest, plugin_name) in sorted(_manifests(pm).items())
    ]


class Provider:
    """One provider, with one method per hook. Get it with `get_provider(name)`."""

    def __init__(self, pm: pluggy.PluginManager, manifest: ProviderManifest, settings: Settings) -> None:
        self._pm = pm
        self.manifest = manifest
        self.settings = settings

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def capabilities(self) -> Capabilities:
        return self.manifest.capabilities

    def __repr__(self) -> str:
        return f"<Provider {self.name}>"

    def _answer(self, hook: str, **kwargs: Any) -> Any:
        result = getattr(self._pm.hook, hook)(provider=self.name, settings=self.settings, **kwargs)
        if result is None:
            raise ProviderError(f"provider {self.name!r} does not implement the {hook!r} hook")
        return result

    def volume(self, kind: str) -> Volume:
        """The volume of a kind (`data`, `models`, `eval`, `hf-cache`), by its configured name."""
        return self._answer("volume", name=self.settings.volumes.name_for(kind))  # type: ignore[no-any-return]

    def kv(self, namespace: str) -> KVStore:
        return self._answer("kv_store", namespace=namespace)  # type: ignore[no-any-return]

    def runner(self) -> FunctionRunner:
        return self._answer("run_function")  # type: ignore[no-any-return]

    def spawn(self, function: str, **kwargs: Any) -> RunHandle:
        """Start job `function` detached; the handle's `call_id` finds it again later."""
        return self.runner().spawn(function, kwargs)

    def call(self, call_id: str) -> RunHandle:
        return self.runner().get(call_id)

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
        hook = getattr(self._pm.hook, "inference_server", None)
        if hook is None:
            return None
        return hook(provider=self.name, settings=self.settings)  # type: ignore[no-any-return]


def get_provider(
    name: str | None = None,
    settings: Settings | None = None,
    *,
    pm: pluggy.PluginManager | None = None,
) -> Provider:
    """The provider `name` (default: `settings.provider.provider`).

    Raises `NotFoundError` listing the installed providers when there is none of that name.
    """
    if settings is None:
        from trainkit_core.settings import Settings

        settings = Settings.from_env()
    name = name or settings.provider.provider
    pm = pm or get_plugin_manager()
    manifests = _manifests(pm)
    if name not in manifests:
        installed = ", ".join(sorted(manifests)) or "none"
        raise NotFoundError(
            f"unknown provider {name!r}; installed providers: {installed}",
            hint="install the provider's package (e.g. pip install trainkit-modal) or check TRAINKIT_PROVIDER",
        )
    return Provider(pm, manifests[name][0], settings)


def call_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Check that job arguments are JSON-able, as every provider must ship them."""
    import json

    try:
        return json.loads(json.dumps(dict(kwargs)))  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        from trainkit_core.errors import UsageError

        raise UsageError(f"job arguments must be JSON-serialisable: {exc}") from None
