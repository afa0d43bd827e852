"""A job runner whose calls are detached processes, over any provider's own key-value store.

Any provider whose jobs run as processes on the machine that starts them can answer
its `run_function` hook with a `DetachedRunner` (the `local` provider does)::

    DetachedRunner(
        provider="myprovider",                      # the child processes find the store through it
        settings=settings,
        calls=my_kv_store(settings, CALLS_NAMESPACE),  # where call records live
        logs_dir=my_home / "logs",
        job_context="my_package.plugin:job_context",  # (settings, call_id) -> JobContext
    )

A call is three processes deep. `spawn` starts a launcher that forks a *supervisor*
and exits at once, so the caller is never left with a zombie and the supervisor is
adopted by init. The supervisor leads a new session and process group, starts the
*worker* (which builds the job's `JobContext` with the provider's ``job_context``
function and runs the job function) and waits for it: when the worker dies without
reporting (kill -9, OOM), the supervisor records the signal or exit code. If the
supervisor itself vanishes, the next `status()` from any process notices the dead
pids. `cancel` ends the whole process group, so whatever the job started ends too.

Both child processes get the provider back with `get_provider(provider)` from the
``TRAINKIT_*`` environment (the settings object is passed down as variables), so the
provider must be installed through its entry point.

The store needs nothing but the `KVStore` protocol. A call is a few keys, each with
one writer, and its outcome is written once with `put_if_absent`, so the first of the
worker (result or error), the supervisor (exit status), `cancel` and a `status()` that
found the processes gone decides it, and no read-modify-write can lose an update:

- ``<id>``: what to run (function, arguments, log file, job context), written by `spawn`;
- ``<id>/proc``: the supervisor's and the worker's pids with their start times;
- ``<id>/started``: when the worker started;
- ``<id>/cancel``: a cancel was requested;
- ``<id>/exit``: the worker's exit status;
- ``<id>/end``: the outcome (state, time, error, result).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import JobError, JobTimeout, NotFoundError, OutOfSpaceError, UsageError
from trainkit_core.plugins.hookspecs import CallStatus, KVStore
from trainkit_core.toolkit.processes import alive, describe_exit, end_group, process_start_time

if TYPE_CHECKING:
    from trainkit_core.plugins.job_context import JobContext
    from trainkit_core.settings import Settings

#: This module, as the child processes run it (``python -m``), where ``__name__`` is ``__main__``.
MODULE = "trainkit_core.toolkit.detached"
CALLS_NAMESPACE = "_calls"
CANCEL_GRACE_S = 5.0
#: A worker's exit status when it could not record its end for a full disk.
EXIT_OUT_OF_SPACE = 75
#: How long a call may wait for its supervisor to register before it counts as vanished.
START_GRACE_S = 30.0


#: How long a supervisor keeps trying to record how its call ended while the disk is full.
RECORD_END_PATIENCE_S = 3600.0


def _end(calls: KVStore, call_id: str, state: str, **fields: Any) -> bool:
    """Decide the call's outcome, unless something decided it first. True when this did."""
    return calls.put_if_absent(f"{call_id}/end", {"state": state, "ended_at": time.time(), **fields})


def _end_when_possible(calls: KVStore, call_id: str, state: str, **fields: Any) -> bool:
    """`_end`, retried while the store's disk is full, so the cause outlives the full disk.

    Without it, a job that died of a full disk left no end at all, and once space was
    freed it read "worker process vanished", the cause only in its log.
    """
    deadline = time.monotonic() + RECORD_END_PATIENCE_S
    pause = 1.0
    while True:
        try:
            return _end(calls, call_id, state, **fields)
        except OutOfSpaceError:
            if time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 30.0)


def import_object(path: str) -> Any:
    """The object at ``module:attribute``."""
    import importlib

    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class DetachedRunHandle:
    """One call, seen from any process through the provider's store (a `RunHandle`)."""

    def __init__(self, calls: KVStore, call_id: str) -> None:
        self._calls = calls
        self.call_id = call_id
        call_record = calls.get(call_id)
        if not isinstance(call_record, dict) or "function" not in call_record:
            raise NotFoundError(f"no job call {call_id!r}")
        self._call_record = call_record
        self.function: str = call_record["function"]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.call_id} {self.function}>"

    def _raw(self) -> dict[str, Any]:
        from trainkit_core.toolkit.kv_values import get_many

        parts = ("proc", "end", "started", "cancel", "exit")
        got = get_many(self._calls, [f"{self.call_id}/{part}" for part in parts])
        proc, end, started, cancel, exit_code = (got.get(f"{self.call_id}/{part}") for part in parts)
        state = end["state"] if end else ("running" if started else "pending")
        return {
            **self._call_record,
            **(proc or {}),
            "state": state,
            "started_at": started,
            "cancel_requested": cancel is not None,
            "exit_code": exit_code,
            **{k: v for k, v in (end or {}).items() if k != "state"},
        }

    def record(self) -> dict[str, Any]:
        """Everything known about the call, after noticing processes that died without a word."""
        record = self._raw()
        if record["state"] in ("pending", "running") and not self.still_running(record):
            cancelled = record["cancel_requested"]
            _end(
                self._calls,
                self.call_id,
                "cancelled" if cancelled else "failed",
                error="cancelled"
                if cancelled
                else "worker process vanished without reporting (killed, or the machine restarted)",
            )
            record = self._raw()
        return record

    @staticmethod
    def still_running(record: Mapping[str, Any]) -> bool:
        if alive(record.get("supervisor_pid"), record.get("supervisor_start")):
            return True
        if alive(record.get("pid"), record.get("pid_start")):
            return True
        # A call that has not reached its supervisor yet is given a moment.
        return record.get("supervisor_pid") is None and time.time() - record["created_at"] < START_GRACE_S

    @property
    def pid(self) -> int | None:
        """The worker's pid (the process that runs the job function)."""
        return (self._calls.get(f"{self.call_id}/proc") or {}).get("pid")

    @property
    def log_path(self) -> Path:
        return Path(self._call_record["log_path"])

    def status(self) -> CallStatus:
        r = self.record()
        return CallStatus(r["state"], r.get("started_at"), r.get("ended_at"), r.get("exit_code"), r.get("error"))

    def wait(self, timeout: float | None = None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.02
        while True:
            record = self.record()
            if record["state"] == "succeeded":
                return record.get("result")
            if record["state"] == "failed":
                raise JobError(f"job {self.function} ({self.call_id}) failed: {record.get('error')}")
            if record["state"] == "cancelled":
                raise JobError(f"job {self.function} ({self.call_id}) was cancelled")
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeout(f"job {self.function} ({self.call_id}) still {record['state']} after {timeout:g} s")
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * 1.5, 0.25)

    def cancel(self, grace_s: float = CANCEL_GRACE_S) -> None:
        """End the call's processes (SIGTERM, SIGKILL after `grace_s`), then record it cancelled."""
        if self.record()["state"] not in ("pending", "running"):
            return
        # The flag first, the pids second: a supervisor registers its pid first and reads
        # the flag second, so one of the two always sees the other.
        self._calls.put(f"{self.call_id}/cancel", time.time())
        proc = self._calls.get(f"{self.call_id}/proc") or {}
        pgid = proc.get("supervisor_pid")
        # The supervisor leads the call's process group; the group outlives it while the
        # worker lives, and its id is not reused while it exists.
        if pgid and (alive(pgid, proc.get("supervisor_start")) or alive(proc.get("pid"), proc.get("pid_start"))):
            end_group(pgid, grace_s, lambda: self.still_running(self._raw()))
        _end(self._calls, self.call_id, "cancelled", error="cancelled")

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class DetachedRunner:
    """A `FunctionRunner` whose calls are detached processes (see the module's docstring).

    `settings` reach the job: the child processes rebuild them from the ``TRAINKIT_*``
    variables (and the plugins' own) they inherit; `env` adds variables of the
    provider's own. `call_prefix` starts every call id, so `get` can refuse ids that
    are not this runner's.
    """

    handle_class: type[DetachedRunHandle] = DetachedRunHandle

    def __init__(
        self,
        *,
        provider: str,
        calls: KVStore,
        logs_dir: Path,
        job_context: str,
        settings: Settings | None = None,
        env: Mapping[str, str] | None = None,
        call_prefix: str = "dc-",
    ) -> None:
        self.provider = provider
        self.calls = calls
        self.logs_dir = Path(logs_dir)
        self.job_context = job_context
        self.settings = settings
        self.env = dict(env or {})
        self.call_prefix = call_prefix

    def spawn(self, function: str, kwargs: Mapping[str, Any]) -> DetachedRunHandle:
        from trainkit_core.plugins.jobs import JOBS
        from trainkit_core.plugins.provider import call_kwargs

        if function not in JOBS:
            raise NotFoundError(f"unknown job function {function!r}; known: {', '.join(sorted(JOBS))}")
        arguments = call_kwargs(kwargs)
        call_id = self.call_prefix + uuid.uuid4().hex[:20]
        log_path = self.logs_dir / f"{call_id}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.calls.put(
            call_id,
            {
                "call_id": call_id,
                "function": function,
                "kwargs": arguments,
                "created_at": time.time(),
                "log_path": str(log_path.resolve()),
                # The worker's TMPDIR, removed by its supervisor when the worker ends however it
                # ends: a worker killed mid-training left its temporary folder in /tmp for good.
                "scratch_dir": str((self.logs_dir.parent / "scratch" / call_id).resolve()),
                "cwd": os.getcwd(),
                "job_context": self.job_context,
            },
        )
        from trainkit_core.settings import child_environ

        env = {**child_environ(self.settings), **self.env}  # without TRAINKIT_API_TOKEN
        launcher = subprocess.run(
            [sys.executable, "-m", MODULE, "supervise", self.provider, self.calls.namespace, call_id],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if launcher.returncode != 0:
            _end(self.calls, call_id, "failed", error="could not start the job process")
            raise JobError(f"could not start job {function}: {launcher.stderr.decode(errors='replace')[-2000:]}")
        return self.handle_class(self.calls, call_id)

    def get(self, call_id: str) -> DetachedRunHandle:
        prefixed = isinstance(call_id, str) and call_id.startswith(self.call_prefix)
        if not prefixed or not call_id[len(self.call_prefix) :].isalnum():
            raise UsageError(f"{call_id!r} is not a call id of provider {self.provider!r} ({self.call_prefix}…)")
        return self.handle_class(self.calls, call_id)

    def unfinished(self) -> list[DetachedRunHandle]:
        """The calls still pending or running (to cancel what a test or a session left)."""
        ids = [k for k in self.calls.keys(self.call_prefix) if "/" not in k]
        done = {k.rsplit("/", 1)[0] for k in self.calls.keys(self.call_prefix) if k.endswith("/end")}
        return [self.handle_class(self.calls, call_id) for call_id in ids if call_id not in done]


# --------------------------------------------------------------------------- child processes


def _calls_of(provider_name: str, namespace: str) -> tuple[Any, KVStore]:
    from trainkit_core.plugins.provider import get_provider
    from trainkit_core.settings import Settings

    provider = get_provider(provider_name, Settings.from_env())
    return provider, provider.kv(namespace)


def _worker_signals() -> None:
    """SIGTERM (the supervisor ignores it) and SIGINT at their defaults in the worker.

    SIGINT is how a provider preempts a job (`training.job` records `preempted`). An ignored
    signal stays ignored through fork and exec, and Python then installs no KeyboardInterrupt
    for it: a job started from a process that ignores SIGINT (`nohup`, a shell's background
    job, some service managers) could not be preempted.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def supervise(provider_name: str, namespace: str, call_id: str) -> int:
    """Run the worker of one call and record how it ended (in the new process group)."""
    _, calls = _calls_of(provider_name, namespace)
    # SIGTERM reaches the whole process group on cancel; the supervisor stays to record it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me = {"supervisor_pid": os.getpid(), "supervisor_start": process_start_time(os.getpid())}
    calls.put(f"{call_id}/proc", me)
    if calls.get(f"{call_id}/cancel") is not None or calls.get(f"{call_id}/end") is not None:
        _end(calls, call_id, "cancelled", error="cancelled")
        return 0
    call_record = calls.get(call_id)
    scratch = Path(call_record["scratch_dir"]) if call_record.get("scratch_dir") else None
    env = dict(os.environ)
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
        env.update(TMPDIR=str(scratch), TEMP=str(scratch), TMP=str(scratch))
    with open(call_record["log_path"], "ab", buffering=0) as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", MODULE, "work", provider_name, namespace, call_id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=call_record.get("cwd") or None,
            env=env,
            preexec_fn=_worker_signals,
        )
        calls.put(f"{call_id}/proc", {**me, "pid": worker.pid, "pid_start": process_start_time(worker.pid)})
        calls.put_if_absent(f"{call_id}/started", time.time())
        if calls.get(f"{call_id}/cancel") is not None:
            worker.kill()  # a cancel that came while the worker was starting
        returncode = worker.wait()
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    if calls.get(f"{call_id}/cancel") is not None:
        _end_when_possible(calls, call_id, "cancelled", error="cancelled")
    elif returncode == EXIT_OUT_OF_SPACE:
        error = "the job ran out of disk space and could not record its error (its log has the details)"
        _end_when_possible(calls, call_id, "failed", error=error)
    else:
        _end_when_possible(calls, call_id, "failed", error=describe_exit(returncode))
    try:
        calls.put(f"{call_id}/exit", returncode)
    except OutOfSpaceError:
        pass  # the end above is what readers need
    return 0


def work(provider_name: str, namespace: str, call_id: str) -> int:
    """Run the job function of one call in this process and record its result or error."""
    provider, calls = _calls_of(provider_name, namespace)
    call_record = calls.get(call_id)
    try:
        print(f"trainkit: job {call_record['function']} call {call_id} pid {os.getpid()}", flush=True)
    except OSError:
        pass  # a log on a full disk: the job itself says what it can
    try:
        from trainkit_core.plugins.jobs import resolve

        make_context: Callable[[Settings, str], JobContext] = import_object(call_record["job_context"])
        ctx = make_context(provider.settings, call_id)
        result = resolve(call_record["function"])(ctx, **call_record["kwargs"])
        # A result that cannot be stored is the job's error (stores refuse NaN too).
        json.dumps(result, allow_nan=False)
    except BaseException as exc:
        _log_traceback()
        try:
            _end(calls, call_id, "failed", error=f"{type(exc).__name__}: {exc}")
        except OutOfSpaceError:
            return EXIT_OUT_OF_SPACE  # the supervisor records it once it can
        return 1
    try:
        _end(calls, call_id, "succeeded", result=result)
    except OutOfSpaceError:
        _log_traceback()
        return EXIT_OUT_OF_SPACE
    return 0


def _log_traceback() -> None:
    """Print the exception to the call's log; a log on a full disk must not hide the exit status."""
    try:
        traceback.print_exc()
        sys.stdout.flush()
    except OSError:
        pass


def main() -> None:
    role, provider_name, namespace, call_id = sys.argv[1:5]
    if role == "work":
        sys.exit(work(provider_name, namespace, call_id))
    if os.fork() != 0:
        os._exit(0)  # the launcher returns; the child is adopted by init
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        code = supervise(provider_name, namespace, call_id)
    except BaseException:
        text = traceback.format_exc()
        try:
            _, calls = _calls_of(provider_name, namespace)
            _end(calls, call_id, "failed", error=f"supervisor failed: {text[-2000:]}")
        except BaseException:
            pass
        code = 1
    os._exit(code)


if __name__ == "__main__":
    main()
