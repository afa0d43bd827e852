"""The hook specifications: the reference for provider plugin authors.

A provider plugin is a module (or object) with `@hookimpl` functions, registered
through the entry-point group ``trainkit``; the entry point's name is the provider's
name::

    [project.entry-points.trainkit]
    myprovider = "my_package.plugin"

Every hook below but `provider_manifest` is called for one named provider, with
keyword arguments only, as a *firstresult* hook: an implementation returns ``None``
when ``provider`` is not its own, and the first non-``None`` answer wins. An
implementation may accept fewer arguments than the spec names; that is how a spec
grows without breaking older plugins.

The objects the hooks return follow the protocols at the end of this module. The
provider facade (`trainkit_core.plugins.provider`) checks every answer against its protocol
and reports a wrong one, ``None`` for the plugin's own provider, or an exception
that is not trainkit's own, naming the plugin and the hook. The conformance suite in
`trainkit_core.testing` checks a provider against them.

A plugin with settings of its own names its pydantic-settings model (with a prefix
of its own, e.g. ``TRAINKIT_MYPROVIDER_``) in a module attribute
``trainkit_settings``; its hooks read it with ``settings.plugin(MySettings)``. The
public pieces a provider can reuse are in `trainkit_core.plugins.jobs`: `detached` (job
calls as detached processes), `processes` (liveness and cancel), `extras`
(`check_extras` for `Deployment.check`) and `staging` (folders for volumes that
are not folders).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pluggy

if TYPE_CHECKING:
    from trainkit_core.settings import Settings

PROJECT = "trainkit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The kinds of volume every provider serves, each under its configured name.
VOLUME_KINDS = ("data", "models", "eval", "hf-cache")


# --------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class Capabilities:
    """What a provider can do. The conformance suite holds a provider to what it declares."""

    #: Jobs can run on a GPU.
    gpu: bool = False
    #: A running job can be stopped gracefully (stop flag) and cancelled.
    stop: bool = False
    #: Inference keeps loaded models in a warm process between requests.
    warm_inference: bool = False
    #: The provider can host the web API at a public endpoint.
    web_endpoint: bool = False
    #: Volumes outlive the process that wrote them.
    durable_volumes: bool = False
    #: The key-value store outlives the process that wrote it and is shared between processes.
    durable_kv: bool = False
    #: Job functions run detached, through `run_function`.
    run_functions: bool = False
    #: There is an app to deploy, inspect and stop (`trainkit app deploy|status|stop`).
    app_lifecycle: bool = False
    #: Jobs see the files of the machine that starts them (a base model may be a folder there).
    local_files: bool = False
    #: Most GPUs one job may use on one machine; a run asking for more is refused before it starts.
    max_gpus_per_node: int = 1
    #: Most machines one job may span.
    max_nodes: int = 1
    #: One run may train on N CPU processes of one machine (``--processes``, gloo): the distributed
    #: code path that N GPUs take, for a machine without them.
    cpu_processes: bool = False

    def as_dict(self) -> dict[str, bool | int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class ProviderManifest:
    """A provider's declaration of itself, answered by the `provider_manifest` hook."""

    name: str
    capabilities: Capabilities
    description: str = ""


# --------------------------------------------------------------------------- hooks


@hookspec
def provider_manifest() -> ProviderManifest | list[ProviderManifest]:  # type: ignore[empty-body]
    """Declare the provider(s) this plugin implements, with their capabilities.

    Collect-all: every plugin answers. A plugin normally declares one provider, named
    like its entry point.
    """


@hookspec(firstresult=True)
def volume(provider: str, settings: Settings, name: str) -> Volume | None:
    """Return the named file store `name` of `provider` (created when missing).

    `name` is the configured volume name (e.g. ``trainkit-data``), not the kind.
    Return ``None`` when `provider` is not yours; the first non-``None`` answer wins.
    """


@hookspec(firstresult=True)
def kv_store(provider: str, settings: Settings, namespace: str) -> KVStore | None:
    """Return the key-value store `namespace` of `provider` (e.g. ``runs``, ``events``).

    Values are JSON-serialisable; keys are strings. Return ``None`` when `provider`
    is not yours; the first non-``None`` answer wins.
    """


@hookspec(firstresult=True)
def run_function(provider: str, settings: Settings) -> FunctionRunner | None:
    """Return the object that starts named job functions on `provider` and finds calls.

    Job functions are looked up by name in `trainkit_core.jobs.JOBS`. A started call
    must outlive the process that started it, and be found again by its id from any
    other process. Return ``None`` when `provider` is not yours; the first
    non-``None`` answer wins.
    """


@hookspec(firstresult=True)
def provision(provider: str, settings: Settings) -> Deployment | None:
    """Return the `Deployment` of `provider`: what its functions need, and its app lifecycle.

    Return ``None`` when `provider` is not yours; the first non-``None`` answer wins.
    """


@hookspec(firstresult=True)
def inference_server(provider: str, settings: Settings) -> InferenceServer | None:
    """Return the warm inference server of `provider` (for providers with `warm_inference`).

    Optional: a provider without one answers nothing, and inference then runs as the
    ``infer`` job through `run_function`. The server keeps loaded models in memory
    between requests (local: a worker process; Modal: a class with a
    ``scaledown_window``). Return ``None`` when `provider` is not yours; the first
    non-``None`` answer wins.
    """


# --------------------------------------------------------------------------- protocols


@dataclass(frozen=True)
class FileEntry:
    """One entry of a volume listing; `path` is relative to the volume's root, with `/`."""

    path: str
    is_dir: bool
    size: int = 0
    mtime: float = 0.0


@runtime_checkable
class Volume(Protocol):
    """A named file store. Paths are relative, `/`-separated, and never leave the volume.

    Implementations refuse absolute paths, ``..`` and anything that would resolve
    outside the volume with `trainkit_core.errors.UsageError`. Writes are atomic: a
    reader sees the old file or the new one, never a part.
    """

    name: str

    def exists(self, path: str) -> bool: ...

    def listdir(self, path: str = "", *, recursive: bool = False) -> list[FileEntry]:
        """Entries under `path`, sorted by path; `NotFoundError` when `path` does not exist."""
        ...

    def read_bytes(self, path: str) -> bytes: ...

    def write_bytes(self, path: str, data: bytes) -> None: ...

    def put_file(self, local_path: Path, path: str) -> None: ...

    def put_directory(self, local_dir: Path, path: str) -> None: ...

    def get_file(self, path: str, local_path: Path) -> None: ...

    def get_directory(self, path: str, local_dir: Path) -> None: ...

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file, or a folder with `recursive`; `NotFoundError` when missing."""
        ...


@runtime_checkable
class KVStore(Protocol):
    """Small durable state: run records, event logs, stop flags. Values are JSON."""

    namespace: str

    def get(self, key: str, default: Any = None) -> Any: ...

    def put(self, key: str, value: Any) -> None: ...

    def put_if_absent(self, key: str, value: Any) -> bool:
        """Write only when `key` is missing; True when this call wrote it. Atomic."""
        ...

    def delete(self, key: str) -> bool:
        """True when the key existed."""
        ...

    def keys(self, prefix: str = "") -> list[str]:
        """Keys starting with `prefix`, in sorted order."""
        ...

    def items(self, prefix: str = "") -> list[tuple[str, Any]]: ...

    # Optional, not part of the protocol check: ``put_many(items: Mapping[str, Any])``
    # writes several keys in one call (one transaction, one request), and
    # ``get_many(keys: list[str]) -> dict[str, Any]`` reads several (missing keys left
    # out), and ``get_many_text(keys)`` the same as stored JSON text, not decoded.
    # trainkit uses them through `trainkit_core.toolkit.kv_values.put_many` / `get_many` /
    # `get_many_text`, which fall back to one `put` / `get` per key.


CALL_STATES = ("pending", "running", "succeeded", "failed", "cancelled")


@dataclass(frozen=True)
class CallStatus:
    """Where a job call stands. `error` is the job's own error text when it failed."""

    state: str
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.state in ("succeeded", "failed", "cancelled")


@runtime_checkable
class RunHandle(Protocol):
    """One call of a job function. Any process can get it again by `call_id`.

    Optionally, a handle has `app`: a mapping with the app that runs the call, as
    ``provider_app_id``, ``provider_app_url`` (a page about the app) and
    ``deployment_id`` (which deployment of it). A training run copies them onto its
    record; a provider without an app leaves the attribute out.
    """

    call_id: str
    function: str

    def status(self) -> CallStatus: ...

    def wait(self, timeout: float | None = None) -> Any:
        """Block until done; the job's return value. Raises `JobError` when the job
        failed or was cancelled, `JobTimeout` when `timeout` passed first."""
        ...

    def cancel(self) -> None:
        """End the call now (no graceful stop). Safe on a call that already ended."""
        ...

    def logs(self) -> str:
        """What the job printed, as far as the provider keeps it ("" when it keeps none)."""
        ...


@runtime_checkable
class FunctionRunner(Protocol):
    """Starts job functions and finds calls, the answer of the `run_function` hook."""

    def spawn(self, function: str, kwargs: Mapping[str, Any]) -> RunHandle:
        """Start `function` (a name in `trainkit_core.jobs.JOBS`) with JSON-able `kwargs`.

        A runner may add a keyword argument ``placement``: it then gets the job's
        `trainkit_core.plugins.placement.Placement` (GPU kind and count, host memory, timeout)
        with every call. A provider that declares the `gpu` capability must take it
        (the conformance suite checks that it arrives).
        """
        ...

    def get(self, call_id: str) -> RunHandle:
        """The call with this id; `NotFoundError` when there is none."""
        ...


@dataclass(frozen=True)
class DeploymentStatus:
    """What `Deployment.status()` reports."""

    state: str  # "deployed", "stopped", "not-deployed", "ready" (nothing to deploy)
    detail: Mapping[str, Any] = field(default_factory=dict)
    url: str | None = None


@runtime_checkable
class Deployment(Protocol):
    """What a provider's functions need, and its app lifecycle (answer of `provision`)."""

    def check(self, functions: list[str]) -> None:
        """Raise `MissingExtraError` naming the pip extra when a function cannot run here."""
        ...

    def deploy(self) -> DeploymentStatus:
        """Create or deploy what the functions need (volumes, images, app)."""
        ...

    def status(self) -> DeploymentStatus: ...

    def stop(self) -> None: ...


@runtime_checkable
class InferenceServer(Protocol):
    """A provider's warm inference, the answer of `inference_server`.

    Requests and answers are the JSON forms of `trainkit_core.inference.request`:
    the model path in a request was validated by the caller, and is validated again
    by the server before it reads anything.
    """

    def generate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Generate one answer; the result dict of the ``infer`` job."""
        ...

    def stream(self, request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Yield ``{"type": "token", "text": …}`` events, then one ``{"type": "done", …result}``.

        A Gemma 4 model's thinking comes as ``{"type": "thinking", "text": …}`` events.
        """
        ...
