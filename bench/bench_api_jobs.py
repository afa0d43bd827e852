"""Latency of `GET /v1/runs` with 1,000 and 20,000 runs in the store, against `GET /health`.

For each store size: starts `trainkit serve` (uvicorn, local provider) on 127.0.0.1 in
a fresh home, writes the run records straight into the store (as an older trainkit
left them: the first listing builds the runs index, before the timing starts), then
times sequential requests from one client, taking turns between the stores so that
both see the same load on the machine. `/health` touches nothing, so its latency
is the floor of this machine (HTTP, uvicorn, FastAPI); each jobs route is printed as
p50/p99, as a ratio to that floor, and as the ratio of the largest store to the
smallest, measured in the same run.

    .venv/bin/python bench/bench_api_jobs.py [--runs 1000,20000] [--requests 200]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill_store(home: Path, count: int) -> None:
    """`count` finished runs (a few still running), in 10 sweep groups, a minute apart."""
    from trainkit_core.runs.training_run import TrainingRun
    from trainkit_core.toolkit.sqlite_kv import LocalKV

    records = LocalKV(home, "runs")
    rng = random.Random(0)
    start = time.time() - count * 60
    batch = {}
    for i in range(count):
        created = start + i * 60
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(created))
        status = rng.choice(["succeeded"] * 8 + ["failed", "stopped"]) if i < count - 3 else "running"
        run = TrainingRun(
            id=f"run-{stamp}-{i:06x}",
            provider="local",
            status=status,
            phase="done" if status != "running" else "training",
            created_at=created,
            updated_at=created,
            config={"dataset": "demo", "model_size": "tiny", "steps": 300, "learning_rate": 0.01, "lora_r": 8},
            dataset_id="demo",
            metadata={"group_id": f"sweep-{i % 10}"},
            metrics={"first_loss": 7.2, "final_loss": 0.4 + rng.random(), "steps": 300},
            step=300,
            total_steps=300,
        )
        batch[run.id] = run.model_dump(mode="json")
        if len(batch) == 1000:
            records.put_many(batch)
            batch = {}
    records.put_many(batch)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextlib.contextmanager
def serving(count: int) -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    """A server on a fresh store of `count` runs: its client and the paths to time."""
    with tempfile.TemporaryDirectory(prefix="trainkit-bench-") as tmp:
        home = Path(tmp)
        fill_store(home, count)
        port = free_port()
        env = {**os.environ, "TRAINKIT_HOME": str(home), "TRAINKIT_API_TOKEN": TOKEN}
        server = subprocess.Popen(
            [sys.executable, "-m", "trainkit_cli", "serve", "--port", str(port), "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(base + "/health", timeout=1)
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("the server did not start") from None
                    time.sleep(0.1)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
                started = time.perf_counter()
                listed = client.get("/v1/runs").json()  # builds the index from the records
                built = time.perf_counter() - started
                assert len(listed["data"]) == 100 and listed["has_more"], "the store was not filled"
                print(f"{count} runs: first listing (builds the index from every record) {built:.2f} s")
                paths = {
                    "/health": "/health",
                    "/v1/runs": "/v1/runs",
                    "/v1/runs?limit=1000": "/v1/runs?limit=1000",
                    "/v1/runs?status=failed": "/v1/runs?status=failed",
                    "/v1/runs?status=running": "/v1/runs?status=running",
                    "/v1/runs?group_id=sweep-3&limit=20": "/v1/runs?group_id=sweep-3&limit=20",
                    "/v1/runs?after=<page 2>": f"/v1/runs?after={listed['next_after']}",
                    "/v1/runs/{id}": f"/v1/runs/{listed['data'][0]['id']}",
                }
                yield client, paths
        finally:
            server.terminate()
            server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="1000,20000", help="store sizes, comma-separated (smallest first)")
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(n) for n in args.runs.split(",")]
    with contextlib.ExitStack() as stack:
        servers = {count: stack.enter_context(serving(count)) for count in sizes}
        routes = list(servers[sizes[0]][1])
        results: dict[int, dict[str, list[float]]] = {count: {route: [] for route in routes} for count in sizes}
        for route in routes:
            for client, paths in servers.values():
                for _ in range(5):  # warm up
                    client.get(paths[route]).raise_for_status()
            for _ in range(args.requests):  # the stores take turns: the same load on both
                for count, (client, paths) in servers.items():
                    started = time.perf_counter()
                    client.get(paths[route]).raise_for_status()
                    results[count][route].append((time.perf_counter() - started) * 1000)
    small, big = sizes[0], sizes[-1]
    for count, timings in results.items():
        floor = statistics.median(timings["/health"])
        print(f"\n{count} runs in the store, {args.requests} sequential requests per route (ms)")
        print(f"{'route':38} {'p50':>8} {'p99':>8} {'p50 / health':>14}")
        for name, times in timings.items():
            p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
            print(f"{name:38} {p50:8.2f} {p99:8.2f} {p50 / floor:13.1f}x")
    if big != small:
        print(f"\nratio {big} runs / {small} runs (requests alternating between the two stores)")
        print(f"{'route':38} {'p50':>8} {'p99':>8}")
        for name in results[small]:
            a, b = results[small][name], results[big][name]
            print(
                f"{name:38} {percentile(b, 0.5) / percentile(a, 0.5):7.2f}x {percentile(b, 0.99) / percentile(a, 0.99):7.2f}x"
            )


if __name__ == "__main__":
    main()
