"""Local job calls: detached processes whose state lives in the SQLite store.

A call is three processes deep. `spawn` starts a launcher that forks a *supervisor*
and exits at once, so the caller is never left with a zombie and the supervisor is
adopted by init. The supervisor leads a new session and process group, starts the
*worker* (which runs the job function) and waits for it: when the worker dies
without reporting (kill -9, OOM), the supervisor records the signal or exit code.
If the supervisor itself vanishes, the next `status()` from any process notices
the dead pids and records the call as failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import JobError, JobTimeout, NotFoundError, UsageError
from trainkit_core.hookspecs import CallStatus
from trainkit_core.local.kv import LocalKV
from trainkit_core.provider import call_kwargs

if TYPE_CHECKING:
    from trainkit_core.settings import Settings

CALLS_NAMESPACE = "_calls"
CANCEL_GRACE_S = 5.0


def new_call_id() -> str:
    return "lc-" + uuid.uuid4().hex[:20]


def logs_dir(home: Path) -> Path:
    return Path(home) / "logs"


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), None when it is gone.

    Stored beside each pid so that a recycled pid is never taken for our process.
    Zombies count as gone.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        if sys.platform.startswith("linux"):
            return None
        try:  # no /proc (macOS): fall back to a signal-0 probe
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def alive(pid: int | None, start_time: int | None) -> bool:
    if not pid:
        return False
    now = process_start_time(pid)
    return now is not None and (start_time in (None, 0) or now == start_time)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"worker killed by {name} (signal {-returncode})"
    return f"worker exited with code {returncode} without reporting a result"


class LocalRunHandle:
    """A call's record in the store, seen from any process."""

    def __init__(self, calls: LocalKV, call_id: str) -> None:
        self._calls = calls
        self.call_id = call_id
        record = calls.get(call_id)
        if record is None:
            raise NotFoundError(f"no local job call {call_id!r}")
        self.function: str = record["function"]

    def __repr__(self) -> str:
        return f"<LocalRunHandle {self.call_id} {self.function}>"

    def record(self) -> dict[str, Any]:
        """The stored record, after noticing a supervisor that died without a word."""
        record = self._calls.get(self.call_id)
        if record["state"] in ("pending", "running") and not self._still_running(record):
            record = self._calls.update(self.call_id, _mark_vanished)
        return record  # type: ignore[no-any-return]

    @staticmethod
    def _still_running(record: dict[str, Any]) -> bool:
        if alive(record.get("supervisor_pid"), record.get("supervisor_start")):
            return True
        if alive(record.get("pid"), record.get("pid_start")):
            return True
        # A call that has not reached its supervisor yet is given a moment.
        return record.get("supervisor_pid") is None and time.time() - record["created_at"] < 30

    @property
    def pid(self) -> int | None:
        """The worker's pid (the process that runs the job function)."""
        return self._calls.get(self.call_id).get("pid")  # type: ignore[no-any-return]

    @property
    def log_path(self) -> Path:
        return Path(self._calls.get(self.call_id)["log_path"])

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
        """SIGTERM the call's process group, SIGKILL what is left after `grace_s`."""
        record = self._calls.update(self.call_id, lambda r: {**r, "cancel_requested": True})
        if record["state"] not in ("pending", "running"):
            return
        pgid = record.get("supervisor_pid")
        if pgid and alive(pgid, record.get("supervisor_start")):
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and self._still_running(self._calls.get(self.call_id)):
                time.sleep(0.05)
            if self._still_running(self._calls.get(self.call_id)):
                _signal_group(pgid, signal.SIGKILL)
        elif record.get("pid") and alive(record.get("pid"), record.get("pid_start")):
            _signal_group(record["pid"], signal.SIGKILL)
        self._calls.update(self.call_id, _mark_cancelled)

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _mark_vanished(record: dict[str, Any]) -> dict[str, Any]:
    if record["state"] not in ("pending", "running"):
        return record
    state = "cancelled" if record.get("cancel_requested") else "failed"
    return {
        **record,
        "state": state,
        "ended_at": time.time(),
        "error": record.get("error") or "worker process vanished without reporting (killed, or the machine restarted)",
    }


def _mark_cancelled(record: dict[str, Any]) -> dict[str, Any]:
    if record["state"] not in ("pending", "running"):
        return record
    return {**record, "state": "cancelled", "ended_at": time.time(), "error": "cancelled"}


class LocalRunner:
    """The `run_function` answer of the local provider.

    `settings`, when given, reach the job: the worker process rebuilds them from the
    `TRAINKIT_*` variables it inherits, so a job sees the caller's settings object,
    not only the caller's environment.
    """

    def __init__(self, home: Path, settings: Settings | None = None) -> None:
        self.home = Path(home)
        self.settings = settings
        self.calls = LocalKV(self.home, CALLS_NAMESPACE)

    def spawn(self, function: str, kwargs: Mapping[str, Any]) -> LocalRunHandle:
        from trainkit_core.jobs import JOBS

        if function not in JOBS:
            raise NotFoundError(f"unknown job function {function!r}; known: {', '.join(sorted(JOBS))}")
        call_id = new_call_id()
        log_path = logs_dir(self.home) / f"{call_id}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.calls.put(
            call_id,
            {
                "call_id": call_id,
                "function": function,
                "kwargs": call_kwargs(kwargs),
                "state": "pending",
                "created_at": time.time(),
                "log_path": str(log_path),
                "cwd": os.getcwd(),
            },
        )
        from trainkit_core.settings import child_environ  # settings only once a job starts

        env = child_environ(self.settings)  # without TRAINKIT_API_TOKEN
        env["TRAINKIT_HOME"] = str(self.home.resolve())
        launcher = subprocess.run(
            [sys.executable, "-m", "trainkit_core.local.supervisor", call_id],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if launcher.returncode != 0:
            self.calls.update(call_id, lambda r: {**r, "state": "failed", "error": "could not start the job process"})
            raise JobError(f"could not start job {function}: {launcher.stderr.decode(errors='replace')[-2000:]}")
        return LocalRunHandle(self.calls, call_id)

    def get(self, call_id: str) -> LocalRunHandle:
        if not isinstance(call_id, str) or not call_id.startswith("lc-") or not call_id[3:].isalnum():
            raise UsageError(f"{call_id!r} is not a local call id (lc-…)")
        return LocalRunHandle(self.calls, call_id)
