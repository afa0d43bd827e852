"""What runs inside a Modal container: build a trainkit `JobContext` and call the job.

The functions `trainkit_modal.app` declares are thin closures around `run_job`. It
gives the job function a `JobContext` whose key-value stores are `modal.Dict`s and
whose volumes are the mount points of the `modal.Volume`s; the job code itself
(`trainkit_core.plugins.jobs`) never imports modal. The volumes a job reads (`JOB_READS`) are
reloaded before it (a warm container may hold a stale view), and every volume is
committed after it, failed or not, so that what it wrote is visible to every other
container and to the user.

A reload fails while files of the volume are open in the container (a warm inference
container memory-maps its models' weights). That is logged, and the container
recovers: it drops its cached models (closing those files) and reloads again.

Each call leaves small records in the ``_calls`` namespace so that a `ModalRunHandle`
can tell pending from running and show the job's own error text even when the
exception cannot be unpickled on the caller's side.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trainkit_core.plugins.hookspecs import VOLUME_KINDS
from trainkit_core.settings import Settings
from trainkit_modal import spec
from trainkit_modal.records import CALLS_NAMESPACE, ended_key, started_key

log = logging.getLogger(__name__)

#: The volumes each job reads, reloaded before it runs (other jobs reload none). The
#: hf-cache is left alone: reloading it buys nothing (a missing base model is downloaded)
#: and its weights are the files a warm container keeps open. `infer` runs in the warm
#: inference class, which reloads the models volume itself before every request
#: (`WarmInference.reload_models`, which can drop its loaded models to recover).
JOB_READS: dict[str, tuple[str, ...]] = {
    "train": ("data", "models"),
    "eval": ("data", "models", "eval"),
    "export": ("models",),
}


#: The jobs that compute on their function's GPU: each stops at once when torch cannot use
#: the GPU the container was given (a host driver too old for the image's CUDA), rather
#: than running on the CPU for hours (`trainkit_core.training.gpu`).
GPU_JOBS = ("train", "eval", "export", "infer")


def max_attempts(job: str, settings: Settings) -> int:
    """How many attempts Modal gives one call of `job` (the `modal.Retries` of its function, plus one)."""
    return settings.compute.train_max_attempts if job == "train" else 1


def reload_volumes(ctx: Any, kinds: tuple[str, ...], recover: Callable[[], None] | None = None) -> None:
    """Reload the volumes of `kinds`; when one fails, log it, `recover()` (drop open files) and try again.

    A reload that still fails is logged as an error and the job goes on with the view it
    has: what it cannot find it reports as missing.
    """
    for kind in kinds:
        try:
            ctx.reload(kind)
            continue
        except Exception as exc:
            log.warning("volume %s: reload failed: %s", kind, exc)
            if recover is None:
                log.error("volume %s: nothing to recover with; this container keeps a stale view", kind)
                continue
        log.warning("volume %s: dropping cached models and reloading again", kind)
        recover()
        try:
            ctx.reload(kind)
            log.warning("volume %s: reloaded after dropping cached models", kind)
        except Exception as exc:
            log.error("volume %s: reload failed again, this container keeps a stale view: %s", kind, exc)


def cluster_place(sdk: Any) -> tuple[int, tuple[str, ...]]:
    """(this container's rank, the cluster's IPv4 addresses in rank order); (0, ()) outside a cluster.

    modal 1.6.4's `modal.Cluster.from_context()` raises `InvalidError` in a container of a
    function that is not clustered.
    """
    cluster_class = getattr(sdk, "Cluster", None)
    if cluster_class is None:
        return 0, ()
    try:
        cluster = cluster_class.from_context()
    except sdk.exception.InvalidError:
        return 0, ()
    return int(cluster.container_rank()), tuple(cluster.container_ips(family="ipv4"))


def job_context(
    settings: Settings, call_id: str, sdk: Any, attempts: int = 1, place: tuple[int, tuple[str, ...]] = (0, ())
) -> Any:
    """The `JobContext` of a job running in this container, over modal `sdk` (`place`: `cluster_place`)."""
    from trainkit_core.plugins.jobs import JobContext
    from trainkit_modal.kv import ModalKV
    from trainkit_modal.volume import commit_volume, reload_volume

    def commit(kind: str) -> None:
        commit_volume(sdk, settings.volumes.name_for(kind))

    def reload(kind: str) -> None:
        reload_volume(sdk, settings.volumes.name_for(kind))

    return JobContext(
        settings=settings,
        provider="modal",
        call_id=call_id,
        kv_factory=lambda namespace: ModalKV.for_settings(sdk, settings, namespace),
        volume_paths={kind: Path(spec.MOUNT_PATHS[kind]) for kind in VOLUME_KINDS},
        commit=commit,
        reload=reload,
        max_attempts=attempts,
        rank_context=f"{__name__}:rank_job_context",
        node_rank=place[0],
        node_addresses=place[1],
    )


def rank_job_context(settings: Settings, call_id: str) -> Any:
    """The job context in a rank of a run on the container's GPUs (`trainkit_core.training.distributed`).

    The rank is a process of the same container: it reaches the same Dicts and volumes through
    the modal SDK installed there, under the parent's call id and attempt budget.
    """
    import modal

    return job_context(settings, call_id, modal, attempts=max_attempts("train", settings))


def run_job(job: str, kwargs: dict[str, Any], sdk: Any = None, call: Callable[..., Any] | None = None) -> Any:
    """Run job `job` in this container; the job's result, or its exception re-raised.

    `call(ctx, **kwargs)` replaces the registered job function (the warm inference
    class serves ``infer`` from its loaded models this way).
    """
    if sdk is None:
        import modal as sdk
    from trainkit_core.plugins.jobs import resolve

    settings = Settings.from_env()
    call_id = sdk.current_function_call_id() or f"local-{time.time_ns()}"
    place = cluster_place(sdk)
    ctx = job_context(settings, call_id, sdk, attempts=max_attempts(job, settings), place=place)
    calls = ctx.kv(CALLS_NAMESPACE) if place[0] == 0 else _Unrecorded()  # a cluster's node 0 records the call
    calls.delete(ended_key(call_id))  # a retried attempt starts over
    calls.put(started_key(call_id), {"started_at": time.time()})
    reload_volumes(ctx, JOB_READS.get(job, ()))
    try:
        if job in GPU_JOBS:
            from trainkit_core.training.gpu import check_gpu_visible

            check_gpu_visible()
        result = (call or resolve(job))(ctx, **kwargs)
    except BaseException as exc:
        text = f"{type(exc).__name__}: {exc}"
        log.error("job %s (%s) failed:\n%s", job, call_id, traceback.format_exc())
        calls.put(ended_key(call_id), {"state": "failed", "ended_at": time.time(), "error": text[-4000:]})
        _commit_all(ctx)
        raise
    _commit_all(ctx)
    calls.put(ended_key(call_id), {"state": "succeeded", "ended_at": time.time()})
    return result


class _Unrecorded:
    """The call records of a cluster's other containers: Modal returns node 0's outcome only, so
    only node 0 says when the call started and how it ended."""

    def put(self, key: str, value: Any) -> None:
        return None

    def delete(self, key: str) -> bool:
        return False


def _commit_all(ctx: Any) -> None:
    for kind in VOLUME_KINDS:
        _quietly(ctx.commit, kind)


def _quietly(action: Any, kind: str) -> None:
    """Reload/commit failures must not hide the job's own result; they are logged."""
    try:
        action(kind)
    except Exception as exc:  # logged: the job's outcome matters more
        log.warning("volume %s: %s failed: %s", kind, getattr(action, "__name__", "action"), exc)


class WarmInference:
    """The models an inference container keeps loaded between requests (its `scaledown_window`).

    Built in the class's `@modal.enter`; serves `generate` and `stream` with the
    inference code of trainkit-core (`ModelCache`, `generate`, `stream_tokens`), the
    same code the local warm worker runs. The models volume is reloaded before each
    request, so a model trained after the container started is found.
    """

    def __init__(self, sdk: Any = None) -> None:
        if sdk is None:
            import modal as sdk
        from trainkit_core.inference.loading import ModelCache

        self._sdk = sdk
        self.settings = Settings.from_env()
        self.cache = ModelCache(Path(spec.MOUNT_PATHS["models"]), Path(spec.MOUNT_PATHS["hf-cache"]))

    def preload(self) -> None:
        """Import the model stack now (seconds), not on the first request."""
        for module in ("torch", "transformers", "peft"):
            try:
                __import__(module)
            except ImportError:
                log.warning("warm-up: %s is not installed in this image", module)

    def drop_models(self) -> None:
        """Forget every loaded model, closing the volume files they hold open (a reload needs that)."""
        self.cache.clear()

    def reload_models(self) -> None:
        """See models trained since this container started; drop the loaded ones when a reload needs it."""
        from types import SimpleNamespace

        from trainkit_modal.volume import reload_volume

        ctx = SimpleNamespace(reload=lambda kind: reload_volume(self._sdk, self.settings.volumes.name_for(kind)))
        reload_volumes(ctx, ("models",), self.drop_models)

    def _prepare(self, request: dict[str, Any]) -> tuple[Any, Any]:
        from trainkit_core.inference.request import GenerateRequest
        from trainkit_core.models.trained import default_model_for_preset
        from trainkit_core.toolkit.folder_volume import FolderVolume

        self.reload_models()
        req = GenerateRequest.parse(dict(request))
        if req.model_path is None:
            ref = default_model_for_preset(FolderVolume(self.cache.models_root), req.model_size or "")
            req = req.model_copy(update={"model_path": ref.path, "model_size": None})
        return self.cache.get(req.model_path or ""), req

    def generate(self, request: dict[str, Any]) -> dict[str, Any]:
        from trainkit_core.inference.generation import generate

        loaded, req = self._prepare(request)
        return generate(loaded, req)

    def stream(self, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        from trainkit_core.inference.generation import stream_tokens

        loaded, req = self._prepare(request)
        yield from stream_tokens(loaded, req)
