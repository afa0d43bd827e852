"""Measure how well a vision twin learns the shapes demo through `trainkit train` with its default recipe.

Draws the shapes dataset (`make_shapes_dataset.py`) into a scratch home, trains with
the twin's defaults (extra `trainkit train` options pass through), and prints the
training time and exact match on the unseen eval pictures, base vs tuned, as JSON.

    python scripts/measure_shapes.py [--model-size tiny-gemma3mm] [-- --steps 200 --lr 3e-3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIGURES = ("train_runtime_s", "eval_exact_match", "eval_f1", "base_eval_exact_match", "eval_examples")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-size", default="tiny-gemma3mm")
    parser.add_argument("--train-per-class", type=int, help="training pictures per shape and colour")
    parser.add_argument("--eval-per-class", type=int, help="unseen pictures per shape and colour to score")
    parser.add_argument("train_args", nargs="*", help="more `trainkit train` options (after --)")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("make_shapes_dataset", REPO / "scripts" / "make_shapes_dataset.py")
    assert spec and spec.loader
    shapes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shapes)
    with tempfile.TemporaryDirectory(prefix="trainkit-shapes-") as scratch:
        counts = {"train_per_class": args.train_per_class, "eval_per_class": args.eval_per_class}
        shapes.write(Path(scratch) / "datasets" / "shapes", **{k: v for k, v in counts.items() if v is not None})
        env = {
            **os.environ,
            "TRAINKIT_HOME": str(Path(scratch) / "home"),
            "TRAINKIT_DATASETS_DIR": str(Path(scratch) / "datasets"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        command = [sys.executable, "-m", "trainkit_cli", "train", "--dataset", "shapes", "--model-size"]
        done = subprocess.run(
            [*command, args.model_size, *args.train_args, "--json"], env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            sys.exit(f"trainkit train exited {done.returncode}:\n{done.stderr[-3000:]}")
        record = json.loads(done.stdout)
        print(
            json.dumps(
                {"model_size": args.model_size, "steps": record["config"]["steps"]}
                | {k: record["metrics"].get(k) for k in FIGURES}
            )
        )


if __name__ == "__main__":
    main()
