"""Events that never slow a step: append throughput, and training on a store 50 ms slow.

1. Appends on the local store (SQLite), 20,000 events each way: as `append` wrote
   them before blocks (four store calls per event: the baseline of this run), one
   `append` per event with nothing batched (one block each: two calls), blocks of 100
   written by `EventLog.write`, and `append` with an `EventBatcher` attached (what
   the training callback does), timed until `close()` has written the last one.
   Each rate is printed per second of wall time and per second of this process's
   CPU time (threads included), which does not depend on what else the machine runs.
2. The `train` job on the `tiny` model, run in this process (the local provider's job
   context) `--rounds` times on the plain store and as often on one where every
   key-value call first sleeps 50 ms (`trainkit_core.testing.slow_kv`), alternating,
   after one warm-up run; by default as long as `trainkit train --model-size tiny`
   trains (the preset's steps). Printed: the trainer's own time (the training loop:
   what a slow store must not touch), the whole job, their ratios, and the store
   calls the job's own thread made on the slow store (the rest are made by its
   background writers, which the job waits for only at its end).

    .venv/bin/python bench/bench_events.py [--events 20000] [--steps N] [--delay-ms 50] [--rounds 2] [--no-appends | --no-training]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def appends(home: Path, count: int) -> dict[str, tuple[float, float]]:
    from trainkit_core.runs.event_batch import EventBatcher
    from trainkit_core.runs.events import EventLog
    from trainkit_core.toolkit.sqlite_kv import LocalKV

    kv = LocalKV(home, "events")
    rates = {}
    started, cpu = time.perf_counter(), time.process_time()
    for n in range(count):  # what EventLog.append did before blocks: four calls per event
        seq = int(kv.get("run-before/last", 0)) + 1
        while not kv.put_if_absent(f"run-before/{seq:010d}", {"seq": seq, "type": "progress", "step": n}):
            seq += 1
        if seq > int(kv.get("run-before/last", 0)):
            kv.put("run-before/last", seq)
    rates["before: one event, four calls"] = _rates(count, started, cpu)

    log = EventLog(kv, "run-one-by-one")
    started, cpu = time.perf_counter(), time.process_time()
    for n in range(count):
        log.append("progress", step=n, loss=1.0)
    rates["append, one block per event"] = _rates(count, started, cpu)

    log = EventLog(kv, "run-blocks")
    started, cpu = time.perf_counter(), time.process_time()
    for first in range(0, count, 100):
        log.write(
            [{"type": "progress", "time": time.time(), "step": n, "loss": 1.0} for n in range(first, first + 100)]
        )
    rates["write, blocks of 100"] = _rates(count, started, cpu)

    log = EventLog(kv, "run-batched")
    started, cpu = time.perf_counter(), time.process_time()
    with EventBatcher(log):
        for n in range(count):
            log.append("progress", step=n, loss=1.0)
    rates["append with a batcher (training)"] = _rates(count, started, cpu)
    assert len(log.read()) == count
    return rates


def _rates(count: int, started: float, cpu: float) -> tuple[float, float]:
    """(events per second of wall time, events per second of this process's CPU time).

    The second is what the code costs whatever else the machine runs (SQLite's commits
    in WAL mode with synchronous=NORMAL do not wait for the disk); the first is what a
    caller saw on this machine at this load.
    """
    return count / (time.perf_counter() - started), count / (time.process_time() - cpu)


def train_once(home: Path, steps: int, delay_s: float, calls: Counter[str] | None = None) -> tuple[float, float]:
    """(job wall time, trainer time) of one `train` job in this process; `calls` counts the slow store's calls by thread."""
    from trainkit_core import Settings, get_provider
    from trainkit_core.ids import new_run_id
    from trainkit_core.local.plugin import job_context
    from trainkit_core.runs.training_run import RunStore, TrainingRun
    from trainkit_core.testing.slow_kv import slow_factory
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.job import train
    from trainkit_core.training.submit import _prepare_dataset

    os.environ["TRAINKIT_HOME"] = str(home)
    settings = Settings.from_env()
    provider = get_provider("local", settings)
    config = TrainConfig.parse({"dataset": "demo", "model_size": "tiny", "steps": steps}).resolve(gpu_override="")
    dataset_hash, _ = _prepare_dataset(provider, config)
    run = TrainingRun(
        id=new_run_id(),
        provider="local",
        config=config.model_dump(mode="json"),
        dataset_id=config.dataset,
        dataset_hash=dataset_hash,
        created_at=time.time(),
    ).attach(RunStore.for_provider(provider))
    run.save()
    ctx = job_context(settings, f"bench-{run.id}")
    if delay_s:
        ctx.kv_factory = slow_factory(ctx.kv_factory, delay_s, calls)
    started = time.perf_counter()
    summary = train(ctx, run.id)
    wall = time.perf_counter() - started
    assert summary["status"] == "succeeded", summary
    return wall, float(summary["metrics"]["train_runtime_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=None, help="default: the tiny preset's steps")
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-appends", action="store_true", help="only the training part")
    parser.add_argument("--no-training", action="store_true", help="only the appends")
    args = parser.parse_args()
    os.environ.setdefault("TRAINKIT_DATASETS_DIR", str(REPO / "datasets"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="trainkit-bench-events-") as tmp:
        home = Path(tmp)
        if not args.no_appends:
            print(f"appends on the local store, {args.events} events each")
            rates = appends(home / "appends", args.events)
            base, base_cpu = rates["before: one event, four calls"]
            print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
            for name, (rate, cpu_rate) in rates.items():
                print(
                    f"  {name:36} {rate:10,.0f} events/s  {rate / base:6.1f}x before;"
                    f"  per CPU second {cpu_rate:10,.0f}  {cpu_rate / base_cpu:6.1f}x"
                )

        if args.no_training:
            return
        from trainkit_core.models.presets import get_preset

        steps = args.steps or int(get_preset("tiny").steps or 0)
        os.environ["HF_HOME"] = str(home / "hf")
        train_once(home / "warm-up", steps, 0.0)  # imports, first-run costs
        results: dict[str, list[tuple[float, float]]] = {"plain": [], "slow": []}
        calls: Counter[str] = Counter()
        for n in range(args.rounds):
            for name, delay in (("plain", 0.0), ("slow", args.delay_ms / 1000)):
                results[name].append(train_once(home / f"{name}-{n}", steps, delay, calls if name == "slow" else None))
    wall = {k: statistics.median(w for w, _ in v) for k, v in results.items()}
    loop = {k: statistics.median(t for _, t in v) for k, v in results.items()}
    print(f"\ntrain job, tiny model, {steps} steps, median of {args.rounds} (s)")
    print(f"  {'store':28} {'trainer':>9} {'job':>9}")
    print(f"  {'plain local store':28} {loop['plain']:9.2f} {wall['plain']:9.2f}")
    print(f"  {f'+{args.delay_ms:g} ms on every KV call':28} {loop['slow']:9.2f} {wall['slow']:9.2f}")
    print(f"  {'ratio slow / plain':28} {loop['slow'] / loop['plain']:8.3f}x {wall['slow'] / wall['plain']:8.3f}x")
    own = calls[threading.main_thread().name] / args.rounds
    print(
        f"  store calls per slow job: {sum(calls.values()) / args.rounds:.0f}, of them on the job's own thread {own:.0f}"
    )


if __name__ == "__main__":
    main()
