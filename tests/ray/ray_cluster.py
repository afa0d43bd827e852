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
#: Ray Client's port, below the default range of worker ports (10002-19999).
CLIENT_PORT = 10001


def only_loopback() -> bool:
    """True when this process's network namespace holds no interface but `lo`."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]  # /sys may still show the host's


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


#: The head's processes without gRPC's fork handlers. Ray Client's proxier starts each
#: client's server by forking its own multi-threaded, gRPC-serving process; with the handlers
#: on, the forked child restarted gRPC's threads before its exec and died of SIGSEGV at once
#: (seen under strace in the full `ray` session: "SpecificServer startup failed", an empty
#: ray_client_server_<port>.err), a race that the session's load made likely.
CLUSTER_ENV = {"GRPC_ENABLE_FORK_SUPPORT": "false"}

#: Memory the head declares (Ray's logical `memory` resource, not reserved): room for the
#: placements the tests ask for (a tiny job's 4 GB) whatever the machine has free now.
DECLARED_MEMORY_GB = 16


class LoopbackCluster:
    """One head node (8 logical CPUs, no GPU, 16 GB of declared memory) with its temp folder under `temp`."""

    def __init__(self, temp: Path, second: bool = False, gpus: int = 0) -> None:
        """`second`: other ports throughout, so two clusters can run at once. `gpus`: declared, not real."""
        self.temp = temp
        self.gpus = gpus
        self.process: subprocess.Popen[bytes] | None = None
        shift = 1 if second else 0
        self.head_port, self.client_port = HEAD_PORT + shift, CLIENT_PORT - shift
        self.other_ports = [
            f"--dashboard-port={8265 + shift}",
            f"--dashboard-agent-listen-port={52365 + shift}",
            f"--min-worker-port={20000 if second else 10002}",
            f"--max-worker-port={29999 if second else 19999}",
        ]
        self.address = f"127.0.0.1:{self.head_port}"
        self.client_address = f"ray://127.0.0.1:{self.client_port}"

    def start(self, *, dashboard: bool = True) -> None:
        if not only_loopback():
            raise RuntimeError("refusing to start a Ray cluster outside a network namespace holding only lo")
        ray = Path(sys.executable).with_name("ray")
        log = open(self.temp / "ray-start.log", "ab")  # noqa: SIM115 (kept for the cluster's life)
        self.process = subprocess.Popen(
            [
                str(ray), "start", "--head", "--block", "--disable-usage-stats",
                "--node-ip-address=127.0.0.1", f"--port={self.head_port}", f"--ray-client-server-port={self.client_port}",
                "--num-cpus=8", f"--num-gpus={self.gpus}", f"--memory={DECLARED_MEMORY_GB * 1024**3}", f"--include-dashboard={str(dashboard).lower()}", "--dashboard-host=127.0.0.1",
                f"--temp-dir={self.temp}", *self.other_ports,
            ],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, **CLUSTER_ENV},
        )  # fmt: skip
        self.wait_for_port(self.head_port)

    def wait_for_port(self, port: int) -> None:
        """Until `port` listens (the Ray Client server, `client_port`, comes seconds after the head)."""
        assert self.process is not None
        deadline = time.monotonic() + 120
        while not _port_open(port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Ray head did not start: {(self.temp / 'ray-start.log').read_text()[-3000:]}")
            time.sleep(0.2)

    def logs(self, pattern: str, chars: int = 3000) -> str:
        """The end of each of the cluster's log files matching `pattern` (for a failure's message)."""
        found = sorted((self.temp / "session_latest" / "logs").glob(pattern))
        return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-chars:]}" for p in found) or "(none)"

    def stop(self) -> None:
        """End the process group of the `ray start` this object started (and nothing else)."""
        if self.process is None:
            return
        pgid = self.process.pid
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
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
