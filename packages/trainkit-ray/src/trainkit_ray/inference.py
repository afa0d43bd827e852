"""Warm inference on the cluster: one long-lived named actor that keeps models loaded.

The actor (``trainkit-infer``, detached) is created on the first request, keeps a
`ModelCache` of the models volume on the shared storage, and kills itself after
``TRAINKIT_INFER_IDLE_TIMEOUT_S`` without a request, giving its resources back. A
stream is generated on the actor and returned whole (Ray's generator calls are left for
later), so a streaming client gets the tokens at the end.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trainkit_core.hookspecs import VOLUME_KINDS
from trainkit_ray.connection import connect, find_actor
from trainkit_ray.settings import RaySettings
from trainkit_ray.storage import MountedStorage

ACTOR_NAME = "trainkit-infer"


class WarmInferenceActor:
    """The actor's body; `ray.remote` wraps it on first use."""

    def __init__(self, storage: str, env: dict[str, str], idle_timeout_s: float) -> None:
        from trainkit_core.inference.loading import ModelCache
        from trainkit_core.settings import Settings

        os.environ.update(env)
        settings = Settings.from_env()
        store = MountedStorage(Path(storage))
        roots = {kind: store.volume_root(settings.volumes.name_for(kind)) for kind in VOLUME_KINDS}
        os.environ["HF_HOME"] = str(roots["hf-cache"])  # before transformers is imported, as the jobs do
        self.cache = ModelCache(roots["models"], roots["hf-cache"])
        self.storage = storage
        self.idle_timeout_s = float(idle_timeout_s)
        self.requests = 0
        self.last = time.monotonic()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        import ray

        while time.monotonic() - self.last < self.idle_timeout_s:
            time.sleep(min(1.0, self.idle_timeout_s / 4))
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def health(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "storage": self.storage,
            "requests": self.requests,
            "loads": self.cache.loads,
            "adapter_loads": self.cache.adapter_loads,
            "loaded": self.cache.loaded(),
        }

    def _loaded(self, request: Mapping[str, Any]) -> Any:
        from trainkit_core.inference.request import GenerateRequest

        self.last = time.monotonic()
        self.requests += 1
        req = GenerateRequest.parse(dict(request))
        return req, self.cache.get(req.model_path or "")

    def generate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        from trainkit_core.inference.generation import generate

        req, loaded = self._loaded(request)
        try:
            return generate(loaded, req)
        finally:
            self.last = time.monotonic()

    def stream(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        from trainkit_core.inference.generation import stream_tokens

        req, loaded = self._loaded(request)
        try:
            return list(stream_tokens(loaded, req))
        finally:
            self.last = time.monotonic()


class RayInferenceServer:
    """The `inference_server` answer: requests go to the warm actor, started when missing."""

    def __init__(self, own: RaySettings, cluster_storage: str, env: dict[str, str], idle_timeout_s: float) -> None:
        self.own = own
        self.cluster_storage = cluster_storage
        self.env = env
        self.idle_timeout_s = idle_timeout_s

    def actor(self) -> Any:
        ray = connect(self.own)
        found = find_actor(self.own, ACTOR_NAME)
        if found is not None:
            return found
        return (
            ray.remote(WarmInferenceActor)
            .options(
                name=ACTOR_NAME,
                namespace=self.own.namespace,
                lifetime="detached",
                get_if_exists=True,
                num_cpus=self.own.job_cpus,
                max_concurrency=4,
            )
            .remote(self.cluster_storage, self.env, self.idle_timeout_s)
        )

    def _call(self, method: str, request: Mapping[str, Any]) -> Any:
        from trainkit_ray.errors import unwrap

        ray = connect(self.own)
        with unwrap():
            return ray.get(getattr(self.actor(), method).remote(dict(request)))

    def generate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._call("generate", request))

    def stream(self, request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        yield from self._call("stream", request)

    def status(self) -> dict[str, Any] | None:
        found = find_actor(self.own, ACTOR_NAME)
        if found is None:
            return None
        ray = connect(self.own)
        return dict(ray.get(found.health.remote()))
