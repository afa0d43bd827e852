"""The body of one job call on the cluster: a detached, named Ray actor.

A call is an actor named by its call id, created ``lifetime="detached"``: the cluster
(its GCS), not the process that submitted it, owns it, so it outlives that process and
is found again by name from any other. Its constructor starts the job in a thread and
returns; when the job ends, the actor records the outcome in the store and kills itself
without restart. If the actor's process dies (SIGKILL, OOM, a lost node), Ray creates it
again (``max_restarts``) with the same arguments, and the train job resumes from the
run's checkpoint; a job that raises on an attempt before the last exits its process to
get the same restart. This module imports `ray` only inside the actor's process.

Secrets are read from the call's 0600 file on the shared storage into this process's
environment, never passed as actor arguments or a runtime environment, which Ray's
state API and dashboard list.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from trainkit_core.plugins.hookspecs import KVStore
from trainkit_ray import contexts
from trainkit_ray.settings import job_environment
from trainkit_ray.storage import MountedStorage

CALLS_NAMESPACE = "_calls"


def end_call(calls: KVStore, call_id: str, state: str, **fields: Any) -> bool:
    """Decide the call's outcome, unless something decided it first (True when this did)."""
    return calls.put_if_absent(f"{call_id}/end", {"state": state, "ended_at": time.time(), **fields})


def job_context(storage: MountedStorage, settings: Any, call_id: str, max_attempts: int) -> Any:
    """The job's context; a run on several ranks trains on Ray Train's workers (`trainkit_ray.train_ranks`)."""
    from trainkit_ray.train_ranks import launcher

    settings_env = job_environment(settings)
    return contexts.job_context(
        storage, settings, call_id, max_attempts, launch_ranks=launcher(storage.root, settings_env, max_attempts)
    )


class JobActor:
    """One call (see the module docstring); `ray.remote` wraps it when a call is spawned."""

    def __init__(self, storage: str, call_id: str, env: dict[str, str]) -> None:
        os.environ.update(env)
        self.storage = MountedStorage(Path(storage))
        self.call_id = call_id
        os.environ.update(self.storage.read_secrets(call_id))
        self.calls = self.storage.kv(CALLS_NAMESPACE)
        self.call_record: dict[str, Any] = self.calls.get(call_id)
        self._log_to_file()
        self.attempt = int(self.calls.update(f"{call_id}/attempts", lambda n: (n or 0) + 1))
        self.calls.put(f"{call_id}/proc", {"pid": os.getpid(), "node": os.uname().nodename, "attempt": self.attempt})
        self.calls.put_if_absent(f"{call_id}/started", time.time())
        print(
            f"trainkit: job {self.call_record['function']} call {call_id} attempt {self.attempt} pid {os.getpid()}",
            flush=True,
        )
        threading.Thread(target=self._run, name=f"trainkit-job-{call_id}", daemon=True).start()

    def _log_to_file(self) -> None:
        """This process's output (one actor per process) goes to the call's log on the shared storage."""
        path = self.storage.log_path(self.call_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (the process's own stdout)
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115

    def pid(self) -> int:
        return os.getpid()

    def _run(self) -> None:
        call_id, call_record = self.call_id, self.call_record
        max_attempts = int(call_record.get("max_attempts") or 1)
        if self.calls.get(f"{call_id}/cancel") is not None or self.calls.get(f"{call_id}/end") is not None:
            end_call(self.calls, call_id, "cancelled", error="cancelled")
            self._finish()
            return
        timeout = call_record.get("timeout_s")
        if timeout:
            threading.Timer(float(timeout), self._time_out, args=(float(timeout),)).start()
        try:
            from trainkit_core.plugins.jobs import resolve
            from trainkit_core.settings import Settings

            ctx = job_context(self.storage, Settings.from_env(), call_id, max_attempts)
            result = resolve(call_record["function"])(ctx, **call_record["kwargs"])
            json.dumps(result, allow_nan=False)  # a result the store refuses is the job's error
        except BaseException as exc:
            traceback.print_exc()
            if self.attempt < max_attempts:
                print(f"trainkit: attempt {self.attempt} of {max_attempts} failed; Ray starts the next", flush=True)
                os._exit(1)  # Ray restarts the actor: the next attempt
            end_call(self.calls, call_id, "failed", error=f"{type(exc).__name__}: {exc}", attempts=self.attempt)
        else:
            end_call(self.calls, call_id, "succeeded", result=result, attempts=self.attempt)
        self._finish()

    def _time_out(self, timeout: float) -> None:
        print(f"trainkit: the job ran past its timeout of {timeout:g} s", flush=True)
        if end_call(self.calls, self.call_id, "failed", error=f"timed out after {timeout:g} s"):
            self._finish()

    def _finish(self) -> None:
        """The outcome is recorded: drop the secrets and end this actor for good (no restart)."""
        import ray

        self.storage.remove_secrets(self.call_id)
        sys.stdout.flush()
        sys.stderr.flush()
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
