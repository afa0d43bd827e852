"""Process liveness and cancel helpers for providers whose jobs are local processes.

Public so a provider can reuse them (the detached runner of `trainkit_core.toolkit.detached`
and the `local` provider's warm inference worker do). A pid is always stored with the
kernel's start time of the process, so a recycled pid is never taken for ours.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), None when it is gone.

    Store it beside each pid and compare with `alive`. Zombies count as gone. Without
    ``/proc`` (macOS) a signal-0 probe answers, and the start time is 0 (unknown).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        if sys.platform.startswith("linux"):
            return None
        try:
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
    """True when `pid` runs and is the process that had `start_time` (None or 0: any)."""
    if not pid:
        return False
    now = process_start_time(pid)
    return now is not None and (start_time in (None, 0) or now == start_time)


def describe_exit(returncode: int) -> str:
    """A worker's exit status in words, for a call's error text."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"worker killed by {name} (signal {-returncode})"
    return f"worker exited with code {returncode} without reporting a result"


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to a process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_group(pgid: int, grace_s: float, still_running: Callable[[], bool]) -> None:
    """SIGTERM the process group `pgid`, then SIGKILL it if `still_running()` after `grace_s`.

    Ends everything the job started too (its children share the group), which is
    what "cancel" must mean: the record saying cancelled is not enough.
    """
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and still_running():
        time.sleep(0.05)
    if still_running():
        signal_group(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and still_running():
            time.sleep(0.02)
