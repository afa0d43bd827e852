"""Job calls on the cluster, seen from any process through the store (the `run_function` answer).

A call is a few keys of the ``_calls`` namespace of the shared store, each with one
writer, its outcome written once (`put_if_absent`): ``<id>`` (what to run, written by
`spawn`), ``<id>/attempts`` and ``<id>/proc`` (the actor's attempts and process),
``<id>/started``, ``<id>/cancel`` and ``<id>/end``. Reading a finished call needs only
the store; only a call still pending or running asks the cluster whether its actor lives.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import JobError, NotFoundError, UsageError
from trainkit_core.toolkit.detached import DetachedRunHandle
from trainkit_ray.connection import connect, find_actor
from trainkit_ray.job_actor import CALLS_NAMESPACE, end_call
from trainkit_ray.placement import actor_options
from trainkit_ray.settings import FORWARDED_SECRETS, job_environment

if TYPE_CHECKING:
    from trainkit_core.plugins.placement import Placement
    from trainkit_core.settings import Settings
    from trainkit_ray.settings import RaySettings

CALL_PREFIX = "rc-"
#: How long a call may wait for its actor to be placed before a missing actor means it died.
START_GRACE_S = 30.0
#: Jobs Ray runs again from their checkpoint when their process dies (the others run once).
RETRIED_JOBS = ("train",)


class RayRunHandle(DetachedRunHandle):
    """One call (a `RunHandle`): core's detached call record, whose liveness is the actor's.

    `status` and `wait` are the detached handle's, over this `record`.
    """

    def __init__(self, own: RaySettings, storage: Any, call_id: str) -> None:
        self._own = own
        self._storage = storage
        super().__init__(storage.kv(CALLS_NAMESPACE), call_id)

    def _raw(self) -> dict[str, Any]:
        from trainkit_core.toolkit.kv_values import get_many

        parts = ("proc", "end", "started", "cancel", "attempts")
        got = get_many(self._calls, [f"{self.call_id}/{part}" for part in parts])
        proc, end, started, cancel, attempts = (got.get(f"{self.call_id}/{part}") for part in parts)
        return {
            **self._call_record,
            **(proc or {}),
            "state": end["state"] if end else ("running" if started else "pending"),
            "started_at": started,
            "cancel_requested": cancel is not None,
            "attempts": attempts or 0,
            **{k: v for k, v in (end or {}).items() if k != "state"},
        }

    def record(self) -> dict[str, Any]:
        """Everything known about the call, after noticing an actor that died without a word."""
        record = self._raw()
        if record["state"] in ("pending", "running") and not self._actor_alive(record):
            record = self._raw()  # it may have ended while we looked
            if record["state"] in ("pending", "running"):
                cancelled = record["cancel_requested"]
                end_call(
                    self._calls,
                    self.call_id,
                    "cancelled" if cancelled else "failed",
                    error="cancelled"
                    if cancelled
                    else f"the job's Ray actor died without reporting after {record['attempts']} attempt(s) "
                    "(its process was killed, or its node was lost)",
                )
                record = self._raw()
        return record

    def _actor_alive(self, record: Mapping[str, Any]) -> bool:
        if find_actor(self._own, self.call_id) is not None:
            return True
        return record["attempts"] == 0 and time.time() - record["created_at"] < START_GRACE_S

    @property
    def pid(self) -> int | None:
        """The process of the actor's current attempt."""
        return (self._calls.get(f"{self.call_id}/proc") or {}).get("pid")

    def cancel(self, grace_s: float = 0.0) -> None:
        """Kill the call's actor without restart (its process and whatever it runs), then record it cancelled.

        No grace: Ray's kill is immediate (a graceful end is a training run's `runs stop`).
        """
        if self._raw()["state"] not in ("pending", "running"):
            return
        self._calls.put(f"{self.call_id}/cancel", time.time())
        ray = connect(self._own)
        actor = find_actor(self._own, self.call_id)
        if actor is not None:
            ray.kill(actor, no_restart=True)
            deadline = time.monotonic() + 30
            while find_actor(self._own, self.call_id) is not None and time.monotonic() < deadline:
                time.sleep(0.05)
        end_call(self._calls, self.call_id, "cancelled", error="cancelled")
        self._storage.remove_secrets(self.call_id)

    def logs(self) -> str:
        return str(self._storage.read_log(self.call_id))


class RayRunner:
    """Starts job calls as detached actors; finds them by id."""

    def __init__(self, settings: Settings, own: RaySettings, storage: Any, cluster_storage: str) -> None:
        self.settings = settings
        self.own = own
        self.storage = storage
        #: The storage path as the cluster's nodes see it (the actor's argument).
        self.cluster_storage = cluster_storage

    def spawn(self, function: str, kwargs: Mapping[str, Any], placement: Placement | None = None) -> RayRunHandle:
        """Start `function` as a detached actor with the resources of its `placement` (`trainkit_ray.placement`).

        The provider facade (`Provider.spawn`) always passes the placement; without one the
        actor would ask Ray for nothing it needs, so that is refused rather than guessed.
        """
        import os

        from trainkit_core.plugins.jobs import JOBS
        from trainkit_core.plugins.provider import call_kwargs

        if function not in JOBS:
            raise NotFoundError(f"unknown job function {function!r}; known: {', '.join(sorted(JOBS))}")
        if placement is None:
            raise UsageError(
                f"RayRunner.spawn({function!r}) got no placement: start jobs through the provider "
                "(Provider.spawn), which computes it (trainkit_core.plugins.placement)"
            )
        arguments = call_kwargs(kwargs)
        resources = actor_options(placement, self.own.job_cpus)
        if function == "train" and placement.gpu_count * placement.nodes > 1:
            # The run's GPUs are its Ray Train workers' (`trainkit_ray.train_ranks`), not this actor's.
            resources = {**resources, "num_gpus": 0}
            resources.pop("accelerator_type", None)
        max_attempts = self.settings.compute.train_max_attempts if function in RETRIED_JOBS else 1
        call_id = CALL_PREFIX + uuid.uuid4().hex[:20]
        calls = self.storage.kv(CALLS_NAMESPACE)
        calls.put(
            call_id,
            {
                "call_id": call_id,
                "function": function,
                "kwargs": arguments,
                "created_at": time.time(),
                "max_attempts": max_attempts,
                "timeout_s": placement.timeout_s,
                "placement": placement.as_dict(),
                "resources": resources,
            },
        )
        secrets = {name: os.environ[name] for name in FORWARDED_SECRETS if os.environ.get(name)}
        if secrets:
            self.storage.write_secrets(call_id, secrets)
        env = job_environment(self.settings)
        ray = connect(self.own)
        from trainkit_ray.job_actor import JobActor

        try:
            ray.remote(JobActor).options(
                name=call_id,
                namespace=self.own.namespace,
                lifetime="detached",
                max_restarts=max_attempts - 1,
                **resources,
            ).remote(self.cluster_storage, call_id, env)
        except Exception as exc:
            end_call(calls, call_id, "failed", error=f"could not start the job's actor: {exc}")
            self.storage.remove_secrets(call_id)
            raise JobError(f"could not start job {function} on the Ray cluster: {exc}") from None
        return RayRunHandle(self.own, self.storage, call_id)

    def get(self, call_id: str) -> RayRunHandle:
        if not isinstance(call_id, str) or not call_id.startswith(CALL_PREFIX) or not call_id[3:].isalnum():
            raise UsageError(f"{call_id!r} is not a call id of provider 'ray' ({CALL_PREFIX}…)")
        return RayRunHandle(self.own, self.storage, call_id)
