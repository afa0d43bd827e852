"""The `modal` provider's hook implementations (entry point ``trainkit: modal``).

Importing this module does not import modal: `trainkit providers` reads the manifest
without paying for (or needing credentials for) the SDK. The other hooks import
modal when they are called, through the plugin's SDK factory; tests register a
`ModalPlugin` whose factory returns in-process fakes of the few modal objects used
(Dict, Volume with batch_upload, Function / FunctionCall / Cls, App).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainkit_core.plugins.hookspecs import Capabilities, ProviderManifest, hookimpl

if TYPE_CHECKING:
    from trainkit_core.settings import Settings

NAME = "modal"

MANIFEST = ProviderManifest(
    name=NAME,
    description="Modal: cloud GPUs per model size, Volumes, Dicts, warm inference and the web endpoint.",
    capabilities=Capabilities(
        gpu=True,
        stop=True,
        warm_inference=True,
        web_endpoint=True,
        durable_volumes=True,
        durable_kv=True,
        run_functions=True,
        app_lifecycle=True,
        # A run's `gpus` reaches Modal as gpu="<kind>:N" (`with_options`, Modal's limit of 8 per
        # container: spec.MAX_GPU_COUNT, not imported here so the manifest stays cheap); the train
        # job then runs one rank per GPU in that container (`container.rank_job_context`).
        # Several nodes: the app's clustered train functions (spec.CLUSTER_SIZES, 2 to 4).
        max_gpus_per_node=8,
        max_nodes=4,
    ),
)


def import_modal() -> Any:
    """The modal SDK, imported on first use (0.5 s, and never at CLI start)."""
    import modal

    return modal


class ModalPlugin:
    """The hooks of the `modal` provider over an SDK (the real `modal` module, or a fake in tests)."""

    def __init__(self, sdk_factory: Callable[[], Any] = import_modal) -> None:
        self.sdk_factory = sdk_factory

    @hookimpl
    def provider_manifest(self) -> ProviderManifest:
        return MANIFEST

    @hookimpl
    def volume(self, provider: str, settings: Settings, name: str) -> Any:
        if provider != NAME:
            return None
        from trainkit_modal.volume import ModalVolume

        return ModalVolume(self.sdk_factory(), name)

    @hookimpl
    def kv_store(self, provider: str, settings: Settings, namespace: str) -> Any:
        if provider != NAME:
            return None
        from trainkit_modal.kv import ModalKV

        return ModalKV.for_settings(self.sdk_factory(), settings, namespace)

    @hookimpl
    def run_function(self, provider: str, settings: Settings) -> Any:
        if provider != NAME:
            return None
        from trainkit_modal.function_runner import ModalRunner

        return ModalRunner(self.sdk_factory(), settings)

    @hookimpl
    def provision(self, provider: str, settings: Settings) -> Any:
        if provider != NAME:
            return None
        from trainkit_modal.deploy import ModalDeployment

        return ModalDeployment(self.sdk_factory, settings)

    @hookimpl
    def inference_server(self, provider: str, settings: Settings) -> Any:
        if provider != NAME:
            return None
        from trainkit_modal.function_runner import ModalRunner
        from trainkit_modal.inference import ModalInferenceServer

        return ModalInferenceServer(ModalRunner(self.sdk_factory(), settings))


_default = ModalPlugin()


@hookimpl
def provider_manifest() -> ProviderManifest:
    return _default.provider_manifest()


@hookimpl
def volume(provider: str, settings: Settings, name: str) -> Any:
    return _default.volume(provider=provider, settings=settings, name=name)


@hookimpl
def kv_store(provider: str, settings: Settings, namespace: str) -> Any:
    return _default.kv_store(provider=provider, settings=settings, namespace=namespace)


@hookimpl
def run_function(provider: str, settings: Settings) -> Any:
    return _default.run_function(provider=provider, settings=settings)


@hookimpl
def provision(provider: str, settings: Settings) -> Any:
    return _default.provision(provider=provider, settings=settings)


@hookimpl
def inference_server(provider: str, settings: Settings) -> Any:
    return _default.inference_server(provider=provider, settings=settings)
