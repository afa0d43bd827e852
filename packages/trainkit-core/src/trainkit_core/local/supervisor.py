"""The detached supervisor of one local job call (`python -m trainkit_core.local.supervisor ID`).

Forks once so that the caller's launcher exits at once; the child leads a new
session, runs the worker and records how it ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainkit_core.local.kv import LocalKV
from trainkit_core.local.runner import CALLS_NAMESPACE, describe_exit, process_start_time


def supervise(home: Path, call_id: str) -> int:
    calls = LocalKV(home, CALLS_NAMESPACE)
    # SIGTERM reaches the whole process group on cancel; the supervisor stays to record it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me = os.getpid()
    # Registering and reading the cancel flag in one transaction: a cancel that came
    # before we had a pid to signal is seen here, and no worker is started for it.
    record = calls.update(call_id, lambda r: {**r, "supervisor_pid": me, "supervisor_start": process_start_time(me)})
    if record.get("cancel_requested") or record["state"] != "pending":
        calls.update(
            call_id,
            lambda r: (
                {**r, "state": "cancelled", "ended_at": time.time(), "error": "cancelled"}
                if r["state"] in ("pending", "running")
                else r
            ),
        )
        return 0
    with open(record["log_path"], "ab", buffering=0) as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "trainkit_core.local.worker", call_id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=record.get("cwd") or None,
            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
        )
        start = process_start_time(worker.pid)
        calls.update(
            call_id,
            lambda r: (
                {**r, "pid": worker.pid, "pid_start": start, "state": "running", "started_at": time.time()}
                if r["state"] == "pending"
                else r
            ),
        )
        returncode = worker.wait()

    def finish(r: dict) -> dict:  # type: ignore[type-arg]
        r = {**r, "exit_code": returncode}
        if r["state"] in ("pending", "running"):
            cancelled = r.get("cancel_requested")
            r.update(
                state="cancelled" if cancelled else "failed",
                ended_at=time.time(),
                error="cancelled" if cancelled else describe_exit(returncode),
            )
        return r

    calls.update(call_id, finish)
    return 0


def main() -> None:
    call_id = sys.argv[1]
    home = Path(os.environ["TRAINKIT_HOME"])
    if os.fork() != 0:
        os._exit(0)  # the launcher returns; the child is adopted by init
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        code = supervise(home, call_id)
    except BaseException:
        import traceback

        text = traceback.format_exc()
        LocalKV(home, CALLS_NAMESPACE).update(
            call_id,
            lambda r: {**r, "state": "failed", "ended_at": time.time(), "error": f"supervisor failed: {text[-2000:]}"},
        )
        code = 1
    os._exit(code)


if __name__ == "__main__":
    main()
