"""Warm inference on the cluster: one long-lived named actor that keeps models loaded.

The actor (``trainkit-infer``, detached) is created on the first request, keeps a
`ModelCache` of the models volume on the shared storage, and kills itself after
``TRAINKIT_INFER_IDLE_TIMEOUT_S`` without a request, giving its resources back.

A stream is a Ray streaming generator (an actor method that yields): each token event
is an object of its own, which the client reads as soon as the actor yields it. The
actor runs at most `STREAM_AHEAD` events ahead of its reader (Ray's generator
backpressure), so a slow or vanished reader does not pile events up on the cluster;
a reader that stops early cancels the generator. Ray Client (``ray://``) carries no
streaming generators, so a client connected through it gets the events at the end.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trainkit_core.plugins.hookspecs import VOLUME_KINDS
from trainkit_ray.connection import connect, find_actor
from trainkit_ray.settings import RaySettings
from trainkit_ray.storage import MountedStorage

ACTOR_NAME = "trainkit-infer"
#: Token events the actor may yield before its reader has taken them.
STREAM_AHEAD = 8


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
        #: Streams whose generator has not ended yet (a reader may still be reading them).
        self.streaming = 0
        self.last = time.monotonic()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        import ray

        while self.streaming or time.monotonic() - self.last < self.idle_timeout_s:
            time.sleep(min(1.0, self.idle_timeout_s / 4))
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def health(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "storage": self.storage,
            "requests": self.requests,
            "streaming": self.streaming,
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

    def stream(self, request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """A generator: Ray sends each event to the reader as it is yielded."""
        from trainkit_core.inference.generation import stream_tokens

        req, loaded = self._loaded(request)
        self.streaming += 1
        try:
            for event in stream_tokens(loaded, req):
                self.last = time.monotonic()  # a long answer is not idle time
                yield event
        finally:
            self.streaming -= 1
            self.last = time.monotonic()

    def stream_whole(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The same events in one answer, for a Ray Client connection."""
        return list(self.stream(request))


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
        """Each event as the actor yields it; stopping early cancels the actor's generator."""
        from trainkit_ray.errors import unwrap

        if self.own.address.startswith("ray://"):
            yield from self._call("stream_whole", request)
            return
        ray = connect(self.own)
        with unwrap():
            events = (
                self.actor()
                .stream.options(num_returns="streaming", _generator_backpressure_num_objects=STREAM_AHEAD)
                .remote(dict(request))
            )
        finished = False
        try:
            with unwrap():
                for ref in events:
                    yield ray.get(ref)
            finished = True
        finally:
            if not finished:
                with contextlib.suppress(Exception):  # it may have ended meanwhile
                    ray.cancel(events)

    def status(self) -> dict[str, Any] | None:
        found = find_actor(self.own, ACTOR_NAME)
        if found is None:
            return None
        ray = connect(self.own)
        return dict(ray.get(found.health.remote()))
