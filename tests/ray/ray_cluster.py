"""A real local Ray cluster for the tests, listening on loopback only.

The `ray` nox session runs pytest in a network namespace of its own that holds only
`lo` (``unshare -n`` as root, then ``ip link set lo up``), so the head cannot listen on,
or contact, any other address; `LoopbackCluster` refuses to start anywhere else. It is
`ray start --head --block` started in a session of its own, and stopped by that process
group (the pid it started), never by `ray stop`, which ends every cluster of the machine.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HEAD_PORT = 6390
CLIENT_PORT = 10391


def only_loopback() -> bool:
    """True when this process's network namespace holds no interface but `lo`."""
    return sorted(os.listdir("/sys/class/net")) == ["lo"]


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class LoopbackCluster:
    """One head node (8 logical CPUs, no GPU) with its temp folder under `temp`."""

    def __init__(self, temp: Path, head_port: int = HEAD_PORT, client_port: int = CLIENT_PORT) -> None:
        self.temp = temp
        self.process: subprocess.Popen[bytes] | None = None
        self.head_port, self.client_port = head_port, client_port
        self.address = f"127.0.0.1:{head_port}"
        self.client_address = f"ray://127.0.0.1:{client_port}"

    def start(self, *, dashboard: bool = True) -> None:
        if not only_loopback():
            raise RuntimeError("refusing to start a Ray cluster outside a network namespace holding only lo")
        ray = Path(sys.executable).with_name("ray")
        log = open(self.temp / "ray-start.log", "ab")  # noqa: SIM115 (kept for the cluster's life)
        self.process = subprocess.Popen(
            [
                str(ray), "start", "--head", "--block", "--disable-usage-stats",
                "--node-ip-address=127.0.0.1", f"--port={self.head_port}", f"--ray-client-server-port={self.client_port}",
                "--num-cpus=8", "--num-gpus=0", f"--include-dashboard={str(dashboard).lower()}", "--dashboard-host=127.0.0.1",
                f"--temp-dir={self.temp}",
            ],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not (_port_open(self.head_port) and _port_open(self.client_port)):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Ray head did not start: {(self.temp / 'ray-start.log').read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """End the process group of the `ray start` this object started (and nothing else)."""
        if self.process is None:
            return
        pgid = self.process.pid
        for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self._group_alive(pgid):
                self.process.poll()  # reaps our own child, which would otherwise count as alive
                time.sleep(0.2)
            if not self._group_alive(pgid):
                break
        self.process.wait(timeout=10)
        self.process = None

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
