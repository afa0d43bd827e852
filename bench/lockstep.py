"""Two training processes timed in lock-step, for the benches that compare trainkit with bare trl.

On a shared machine two runs timed one after the other see different loads, and the
ratio of their times says more about the neighbours than about trainkit. Here both
sides train at the same time and take turns, one step each (A B A B ...): a side waits
for its turn before a step and hands the turn over at the start of its next one, so
each timed cycle (a whole step: batch, forward, backward, optimizer, every callback and
log of the step) runs alone, next to the other side's matching step. Pairs of the same
step index give a ratio each; the median of those ratios and their spread are the
figure, with the warm-up steps left out. Each cycle's CPU time (`time.process_time`,
every thread of the process) is kept beside its wall time: it moves less with the
load of other processes.

The clock gets into both processes the same way, trainkit's job process included
(started by the local provider, not by the bench): a `sitecustomize` module on
PYTHONPATH adds a `TrainerCallback` to every `transformers.Trainer` once
`transformers.trainer` is imported. Nothing of it is in trainkit's code.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SITECUSTOMIZE = r"""
import os, sys

def _patch(module):
    import json, time
    from pathlib import Path
    from transformers.trainer_callback import TrainerCallback

    class LockStepClock(TrainerCallback):
        def __init__(self):
            self.dir = Path(os.environ["BENCH_CLOCK_DIR"])
            self.me, self.other = os.environ["BENCH_CLOCK_NAME"], os.environ["BENCH_CLOCK_OTHER"]
            self.wall, self.cpu, self.start = [], [], None

        def _hand_over(self):
            tmp = self.dir / f"turn.{self.me}"
            tmp.write_text(self.other)
            os.replace(tmp, self.dir / "turn")

        def _my_turn(self):
            try:
                turn = (self.dir / "turn").read_text()
            except FileNotFoundError:
                turn = ""
            return turn == self.me or (self.dir / f"done.{self.other}").exists()

        def on_step_begin(self, args, state, control, **kwargs):
            if self.start is not None:
                self.wall.append(time.perf_counter() - self.start[0])
                self.cpu.append(time.process_time() - self.start[1])
            self._hand_over()
            while not self._my_turn():
                time.sleep(0.0005)
            self.start = (time.perf_counter(), time.process_time())

        def on_train_end(self, args, state, control, **kwargs):
            (self.dir / f"{self.me}.json").write_text(json.dumps({"wall": self.wall, "cpu": self.cpu}))
            (self.dir / f"done.{self.me}").touch()
            self._hand_over()

    init = module.Trainer.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.add_callback(LockStepClock())

    module.Trainer.__init__ = __init__


if os.environ.get("BENCH_CLOCK_NAME"):
    import importlib.abc, importlib.util

    class _AfterTrainer(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "transformers.trainer":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _patch(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _AfterTrainer())
"""


def offline_environment(home: Path, datasets: Path) -> dict[str, str]:
    """This process's environment with trainkit's home and datasets folder, and the Hugging Face hub offline."""
    return {**os.environ, "TRAINKIT_HOME": str(home), "TRAINKIT_DATASETS_DIR": str(datasets), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1"}  # fmt: skip


def environment(base: dict[str, str], folder: Path, name: str, other: str) -> dict[str, str]:
    """`base` with the clock of side `name` (turns shared with `other` through `folder`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(folder), base.get("PYTHONPATH", "")) if p)
    return {**base, "PYTHONPATH": path, "BENCH_CLOCK_DIR": str(folder), "BENCH_CLOCK_NAME": name,
            "BENCH_CLOCK_OTHER": other}  # fmt: skip


def run_pair(
    commands: dict[str, list[str]], envs: dict[str, dict[str, str]], folder: Path, cwd: Path
) -> tuple[dict[str, dict[str, list[float]]], dict[str, str]]:
    """Start both sides at once; once both have ended, each side's cycle times (wall, cpu) and its output."""
    started = time.perf_counter()
    procs = {
        name: subprocess.Popen(cmd, env=envs[name], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, cmd in commands.items()
    }
    outputs = {name: proc.communicate() for name, proc in procs.items()}
    for name, proc in procs.items():
        if proc.returncode != 0:
            out, err = outputs[name]
            sys.exit(
                f"{name} failed ({proc.returncode}) after {time.perf_counter() - started:.0f} s:\n{out[-3000:]}\n{err[-3000:]}"
            )
    times = {}
    for name in commands:
        file = folder / f"{name}.json"
        if not file.is_file():
            sys.exit(f"{name} ended without its step times ({file}): did its Trainer run?")
        times[name] = json.loads(file.read_text())
    return times, {name: out for name, (out, _) in outputs.items()}


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 4:
        return min(values), statistics.median(values), max(values)
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return q1, q2, q3


def summary(a: str, b: str, times: dict[str, dict[str, list[float]]], warmup: int) -> list[str]:
    """Lines: median per-step time of each side and the median (quartiles) of per-pair ratios a / b."""
    lines = []
    for kind in ("wall", "cpu"):
        left, right = times[a][kind][warmup:], times[b][kind][warmup:]
        pairs = list(zip(left, right, strict=False))
        if not pairs:
            sys.exit(f"no step after the {warmup} warm-up steps: give more steps")
        ratios = [x / y for x, y in pairs if y > 0]
        q1, median, q3 = _quartiles(ratios)
        lines.append(
            f"  {kind:4} a step: {a} {statistics.median(left) * 1000:8.2f} ms, {b} {statistics.median(right) * 1000:8.2f} ms;"
            f" ratio {a}/{b} median {median:.3f} (quartiles {q1:.3f}-{q3:.3f}) over {len(ratios)} pairs"
        )
    return lines


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def compare(
    trainkit: list[str], trl: list[str], base: dict[str, str], folder: Path, cwd: Path
) -> tuple[dict[str, dict[str, list[float]]], dict[str, Any], dict[str, Any]]:
    """Run `trainkit train ... --json` and a bare trl script (printing ``BENCH {json}``) in lock-step.

    Returns the step times of both sides, the trainkit run's metrics (with `run_id`) and the bare script's result.
    """
    commands = {"trainkit": trainkit, "trl": trl}
    envs = {
        "trainkit": environment(base, folder, "trainkit", "trl"),
        "trl": environment(base, folder, "trl", "trainkit"),
    }
    times, outputs = run_pair(commands, envs, folder, cwd)
    record = json.loads(outputs["trainkit"])
    metrics = {**record.get("metrics", {}), "run_id": record.get("training_run_id") or record.get("id")}
    bare = json.loads(outputs["trl"].split("BENCH", 1)[1])
    return times, metrics, bare


def report(
    title: str, times: dict[str, dict[str, list[float]]], warmup: int, metrics: dict[str, Any], bare: dict[str, Any]
) -> None:
    """Print the title (with the load average), the ratios and both sides' losses (equal when the work is the same)."""
    print(f"{title}; load average {load_average()}")
    print("\n".join(summary("trainkit", "trl", times, warmup)))
    print(f"  loss (same recipe, same data): trainkit {metrics['first_loss']:.3f} -> {metrics['final_loss']:.3f}, "
          f"trl {bare['first_loss']:.3f} -> {bare['final_loss']:.3f}")  # fmt: skip
