"""A trainkit command's stdout is its own answer, even while the cluster reports a dead worker.

Ray's driver prints the errors the cluster publishes to it (a worker killed mid-task) on
stdout whatever `log_to_driver` says; `trainkit serve`'s first line (its URL) once came
out as such a message. The driver below connects as trainkit does, has one of its actors
killed mid-call, and its stdout must hold only what it printed itself.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

pytestmark = [pytest.mark.ml, pytest.mark.timeout(300)]

DRIVER = """
import os, signal, sys, time
from trainkit_ray.connection import connect
from trainkit_ray.settings import RaySettings

ray = connect(RaySettings())

@ray.remote
class Sleeper:
    def pid(self):
        return os.getpid()

    def sleep(self):
        time.sleep(120)

sleeper = Sleeper.remote()
pid = ray.get(sleeper.pid.remote())
call = sleeper.sleep.remote()
time.sleep(2)
os.kill(pid, signal.SIGKILL)
try:
    ray.get(call, timeout=120)
except Exception as exc:
    print("the call failed:", type(exc).__name__, file=sys.stderr)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:  # the error arrives on Ray's listener thread, a moment later
    time.sleep(1)
print("the driver's own line")
"""


def test_the_clusters_report_of_a_killed_worker_goes_to_stderr(ray_cluster: Any) -> None:
    done = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "the driver's own line\n", done.stdout
    assert "died" in done.stderr and "(raylet)" in done.stderr, done.stderr[-3000:]  # the report was printed
