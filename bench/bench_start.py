"""A fast start: `trainkit --help` and friends against `modal --help`, and `trainkit serve` ready.

Each command is started `--repeat` times as a new process, alternating, and the
median wall time is printed, with its ratio to `modal --help` (modal 1.6.4, the SDK
a Modal user has installed anyway) measured in the same run. Then `trainkit serve`
is started in a fresh home until `GET /health` answers, a few times: the time from
the process start to the first answer.

    .venv/bin/python bench/bench_start.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

COMMANDS = {
    "trainkit --help": [sys.executable, "-m", "trainkit_cli", "--help"],
    "trainkit runs list --help": [sys.executable, "-m", "trainkit_cli", "runs", "list", "--help"],
    "trainkit providers": [sys.executable, "-m", "trainkit_cli", "providers", "--json"],
    "python -c pass (floor)": [sys.executable, "-c", "pass"],
}


def modal_help() -> list[str]:
    found = shutil.which("modal", path=str(Path(sys.executable).parent)) or shutil.which("modal")
    if found is None:
        raise SystemExit("modal is not installed beside this Python (pip install 'modal==1.6.4')")
    return [found, "--help"]


def wall(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_ready(env: dict[str, str]) -> float:
    port = free_port()
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "trainkit_cli", "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).raise_for_status()
                return time.perf_counter() - started
            except httpx.TransportError:
                if server.poll() is not None or time.perf_counter() - started > 120:
                    raise SystemExit("trainkit serve did not start") from None
                time.sleep(0.02)
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    commands = {"modal --help": modal_help(), **COMMANDS}
    with tempfile.TemporaryDirectory(prefix="trainkit-bench-start-") as tmp:
        env = {**os.environ, "TRAINKIT_HOME": tmp, "MODAL_CONFIG_PATH": str(Path(tmp) / "modal.toml")}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():
            wall(cmd, env)  # warm the file cache
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                times[name].append(wall(cmd, env))
        ready = [serve_ready(env) for _ in range(max(3, args.repeat // 2))]
    modal = statistics.median(times["modal --help"])
    print(f"median of {args.repeat} new processes each, alternating (s)")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:28} {median:7.3f}   {median / modal:5.2f}x modal --help")
    print(f"  {'trainkit serve: /health up':28} {statistics.median(ready):7.3f}   (median of {len(ready)})")


if __name__ == "__main__":
    main()
