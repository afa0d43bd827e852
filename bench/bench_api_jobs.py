"""Latency of `GET /v1/jobs` with 1,000 runs in the store, against `GET /health`.

Starts `trainkit serve` (uvicorn, local provider) on 127.0.0.1 in a fresh home, writes
1,000 run records straight into the store, then times sequential requests from one
client. `/health` touches nothing, so its latency is the floor of this machine
(HTTP, uvicorn, FastAPI); each jobs route is printed as p50/p99 and as a ratio to
that floor, measured in the same run.

    .venv/bin/python bench/bench_api_jobs.py [--runs 1000] [--requests 200]
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill_store(home: Path, count: int) -> None:
    """`count` finished runs (a few still running), in 10 sweep groups, with some events each."""
    from trainkit_core import Settings, get_provider
    from trainkit_core.runs import RunStore, TrainingRun
    from trainkit_core.settings import ProviderSettings

    provider = get_provider("local", Settings(provider=ProviderSettings(home=home)))
    store = RunStore.for_provider(provider)
    rng = random.Random(0)
    start = time.time() - count * 60
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
            config={"dataset": "demo", "model_size": "tiny", "steps": 300, "learning_rate": 0.01, "lora_r": 8},
            dataset_id="demo",
            metadata={"group_id": f"sweep-{i % 10}"},
            metrics={"first_loss": 7.2, "final_loss": 0.4 + rng.random(), "steps": 300},
            step=300,
            total_steps=300,
        ).attach(store)
        run.save()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(client: httpx.Client, path: str, requests: int) -> list[float]:
    for _ in range(5):  # warm up
        client.get(path).raise_for_status()
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        client.get(path).raise_for_status()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="trainkit-bench-") as tmp:
        home = Path(tmp)
        fill_store(home, args.runs)
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
            with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
                listed = client.get("/v1/jobs").json()
                assert len(listed["data"]) == 100 and listed["has_more"], "the store was not filled"
                paths = [
                    "/health",
                    "/v1/jobs",
                    "/v1/jobs?limit=1000",
                    "/v1/jobs?status=failed",
                    "/v1/jobs?group_id=sweep-3&limit=20",
                    f"/v1/jobs/{listed['data'][0]['id']}",
                ]
                results = {path: timed(client, path, args.requests) for path in paths}
        finally:
            server.terminate()
            server.wait(timeout=30)

    floor = statistics.median(results["/health"])
    print(f"{args.runs} runs in the store, {args.requests} sequential requests per route (ms)")
    print(f"{'route':42} {'p50':>8} {'p99':>8} {'p50 / health':>14}")
    for path, times in results.items():
        p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
        print(f"{path:42} {p50:8.2f} {p99:8.2f} {p50 / floor:13.1f}x")


if __name__ == "__main__":
    main()
