"""Several processes by hand: tokens/s of one tiny SFT run on 1 process against the same run on 2 (gloo).

Both runs go through the local provider (`trainkit train --processes N` as a user runs it),
with the same recipe and global batch; tokens/s is the trainer's own count over the training
phase (the last progress event's `tokens_per_s`), so the launch of the ranks is not counted.
The ratio 2-process / 1-process is printed. Timings belong in docs/records, never in tests.

Not yet here: the bare `accelerate launch` baseline with the same recipe (to price trainkit's
own overhead per rank).

    .venv/bin/python bench/distributed.py [--steps 40] [--batch 8]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any


def one(local: Any, processes: int, steps: int, batch: int) -> float:
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.training.submit import start_run

    run = start_run(local, {"dataset": "demo", "steps": steps, "batch_size": batch, "processes": processes})
    run = run.wait(timeout=3600)
    if run.status != "succeeded":
        raise SystemExit(f"{processes} process(es): run {run.id} {run.status}: {run.error_message}")
    events = RunStore.for_provider(local).events(run.id).read()
    rates = [e["tokens_per_s"] for e in events if e.get("type") == "progress" and e.get("tokens_per_s")]
    if not rates:
        raise SystemExit(f"run {run.id} reported no tokens_per_s")
    return float(rates[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    from trainkit_core import get_provider
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[name] = "1"
    work = Path(tempfile.mkdtemp(prefix="bench-distributed-"))
    settings = Settings(
        provider=ProviderSettings(home=work / "home"), datasets=DatasetSettings(datasets_dir=work / "datasets")
    )
    local = get_provider("local", settings)
    single = one(local, 1, args.steps, args.batch)
    double = one(local, 2, args.steps, args.batch)
    print(f"1 process:   {single:10.1f} tokens/s")
    print(f"2 processes: {double:10.1f} tokens/s")
    print(f"ratio 2/1:   {double / single:10.2f}")


if __name__ == "__main__":
    main()
