"""Picture tasks nobody tuned trainkit on: a vision twin's defaults, judged by the worst family.

Why: the twins' recipes were searched on the shapes demo alone ("What is in the
picture?" -> "a red circle"). This script draws families of other picture tasks, each
with its own question and answer words, in seeds whose palette, figures and number of
training pictures (300 or 1,000) differ, and trains each as a new user would:
``trainkit train --dataset NAME --model-size tiny-gemma3mm`` with nothing else. The
run's own end-of-training eval scores 40 pictures drawn apart from training. It prints,
per family and seed, exact match before (the base) and after, and the training time;
then each family's mean, the suite's mean and its worst family.

Families (a 64-pixel picture on a light, noisy background, as the demo's):

- ``colour``: one figure of any shape; "Which colour is it?" -> the colour;
- ``shape``: one figure of any colour; "What shape is this?" -> the shape;
- ``count``: one to four small figures alike; "How many figures are there?" -> "two";
- ``position``: one small figure in a quarter; "Where is the figure?" -> "top left";
- ``colour-side``: a small figure in the left or right half; "Say its colour and side."
  -> "green on the left" (where it is and what colour, together).

    .venv/bin/python bench/picture_suite.py [--family NAME ...] [--seeds N] [--keep DIR]
        [--parallel N] [--threads N] [--set FIELD=JSON ...] [-- OPTIONS]

``-- OPTIONS`` go to ``trainkit train``; ``--set`` gives TrainConfig fields the CLI has no
option for (``vision_learning_rate``, ``modules_to_save``), trained through `start_run`.

Each run takes about two minutes of one CPU thread with the defaults; the whole suite
(5 families x 2 seeds) about 25 minutes on a quiet 2-core machine, two runs at a time.
Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_tiny_recipes import machine
from task_suite import print_family_means, split_at_dashes, train_with, trainkit

SIZE = 64
PALETTE = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 70, 220),
    "yellow": (235, 200, 30),
    "purple": (140, 50, 170),
    "orange": (240, 130, 20),
    "black": (20, 20, 20),
    "grey": (130, 130, 130),
}
FIGURES = ("circle", "square", "triangle", "diamond", "bar")
NUMBERS = ("one", "two", "three", "four")
SIZES = [300, 1000]
EVAL = 40
#: (question, draw one picture and answer it)
Task = tuple[str, Callable[[random.Random], tuple[bytes, str]]]


def picture(figures: list[tuple[str, str, int, int, int]], rng: random.Random) -> bytes:
    """A PNG of `figures` (figure, colour, x, y, side) on a light background with a little noise."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (SIZE, SIZE), tuple(rng.randint(225, 255) for _ in range(3)))
    pen = ImageDraw.Draw(image)
    for figure, colour, x, y, side in figures:
        fill = tuple(max(0, min(255, c + rng.randint(-25, 25))) for c in PALETTE[colour])
        if figure == "circle":
            pen.ellipse((x, y, x + side, y + side), fill=fill)
        elif figure == "square":
            pen.rectangle((x, y, x + side, y + side), fill=fill)
        elif figure == "triangle":
            pen.polygon([(x + side // 2, y), (x, y + side), (x + side, y + side)], fill=fill)
        elif figure == "diamond":
            half = side // 2
            pen.polygon([(x + half, y), (x + side, y + half), (x + half, y + side), (x, y + half)], fill=fill)
        else:  # a bar: as wide as the side, a third as high
            pen.rectangle((x, y + side // 3, x + side, y + 2 * side // 3), fill=fill)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def anywhere(rng: random.Random, low: int, high: int) -> tuple[int, int, int]:
    side = rng.randint(low, high)
    return rng.randint(2, SIZE - side - 2), rng.randint(2, SIZE - side - 2), side


def family(name: str, rng: random.Random) -> Task:
    """The family's question and drawer, with the seed's palette and figures."""
    colours = rng.sample(sorted(PALETTE), rng.choice([3, 4, 5]))
    figures = rng.sample(FIGURES, rng.choice([3, 4, 5]))
    if name == "colour":

        def draw(r: random.Random) -> tuple[bytes, str]:
            colour = r.choice(colours)
            return picture([(r.choice(figures), colour, *anywhere(r, 24, 56))], r), colour

        return "Which colour is it?", draw
    if name == "shape":

        def draw(r: random.Random) -> tuple[bytes, str]:
            figure = r.choice(figures)
            return picture([(figure, r.choice(colours), *anywhere(r, 24, 56))], r), figure

        return "What shape is this?", draw
    if name == "count":

        def draw(r: random.Random) -> tuple[bytes, str]:
            n, figure, colour = r.randint(1, 4), r.choice(figures), r.choice(colours)
            cells = r.sample([(cx, cy) for cx in (0, 32) for cy in (0, 32)], n)  # one per quarter: none overlap
            return picture(
                [(figure, colour, cx + r.randint(2, 14), cy + r.randint(2, 14), 14) for cx, cy in cells], r
            ), NUMBERS[n - 1]

        return "How many figures are there?", draw
    if name == "position":

        def draw(r: random.Random) -> tuple[bytes, str]:
            top, left = r.random() < 0.5, r.random() < 0.5
            x, y = (2 if left else 34) + r.randint(0, 8), (2 if top else 34) + r.randint(0, 8)
            answer = f"{'top' if top else 'bottom'} {'left' if left else 'right'}"
            return picture([(r.choice(figures), r.choice(colours), x, y, 20)], r), answer

        return "Where is the figure?", draw
    if name == "colour-side":

        def draw(r: random.Random) -> tuple[bytes, str]:
            left, colour = r.random() < 0.5, r.choice(colours)
            x, y = (2 if left else 36) + r.randint(0, 6), r.randint(2, 38)
            answer = f"{colour} on the {'left' if left else 'right'}"
            return picture([(r.choice(figures), colour, x, y, 22)], r), answer

        return "Say its colour and side.", draw
    raise ValueError(name)


FAMILIES = ("colour", "shape", "count", "position", "colour-side")


def write_dataset(
    folder: Path, question: str, draw: Callable[[random.Random], tuple[bytes, str]], size: int, rng: random.Random
) -> None:
    (folder / "images").mkdir(parents=True)
    for split, count in (("train", size), ("eval", EVAL)):
        lines = []
        for index in range(count):
            data, answer = draw(rng)
            name = f"images/{split}-{index:04d}.png"
            (folder / name).write_bytes(data)
            parts = [{"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": name}}]
            lines.append(
                json.dumps({"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": answer}]})
            )
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "dataset.toml").write_text(
        f'name = "{folder.name}"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )


def run_one(
    name: str,
    seed: int,
    root: Path,
    model_size: str,
    extra: list[str],
    threads: int = 1,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    rng = random.Random(f"pictures-{name}-{seed}")
    question, draw = family(name, rng)
    size = SIZES[seed % len(SIZES)]
    dataset = f"{name}-{seed}"
    write_dataset(root / "datasets" / dataset, question, draw, size, rng)
    env = {
        **os.environ,
        "TRAINKIT_HOME": str(root / "home"),
        "TRAINKIT_DATASETS_DIR": str(root / "datasets"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": str(threads),
    }
    trainkit(env, "sync", dataset)
    wall = time.perf_counter()
    if overrides:
        run = train_with(env, {"dataset": dataset, "model_size": model_size, **overrides})
    else:
        run = trainkit(env, "train", "--dataset", dataset, "--model-size", model_size, *extra)
    metrics = run.get("metrics") or {}
    return {
        "family": name,
        "seed": seed,
        "train": size,
        "status": run.get("status"),
        "steps": run.get("total_steps"),
        "before": metrics.get("base_eval_exact_match", float("nan")),
        "after": metrics.get("eval_exact_match", float("nan")),
        "train_s": round(float(metrics.get("train_runtime_s", float("nan"))), 1),
        "run_wall_s": round(time.perf_counter() - wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", nargs="*", choices=FAMILIES, help="Families to run (default: all).")
    parser.add_argument("--seeds", type=int, default=2, help="Seeds per family (sizes cycle 300, 1000).")
    parser.add_argument("--model-size", default="tiny-gemma3mm")
    parser.add_argument("--parallel", type=int, default=2, help="Runs at a time.")
    parser.add_argument(
        "--threads", type=int, default=1, help="Torch threads of each run (2 alone on 2 cores: a user's run)."
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=JSON", help="A TrainConfig field (instead of -- OPTIONS)."
    )
    parser.add_argument("--keep", type=Path, help="Keep datasets and runs in this folder (default: a temporary one).")
    own, extra = split_at_dashes(sys.argv[1:])
    opts = parser.parse_args(own)
    overrides = {k: json.loads(v) for k, _, v in (s.partition("=") for s in opts.set)}
    root = opts.keep or Path(tempfile.mkdtemp(prefix="trainkit-picture-suite-"))
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; {opts.model_size} {' '.join(extra)} {overrides or ''}"
    )
    print()
    print("| family | seed | train pictures | steps | exact match before → after | train s | run s |")
    print("|---|---|---|---|---|---|---|")
    jobs = [(name, seed) for name in opts.family or FAMILIES for seed in range(opts.seeds)]
    results: list[dict[str, Any]] = []
    try:
        with ThreadPoolExecutor(max_workers=opts.parallel) as pool:
            futures = [
                pool.submit(run_one, name, seed, root, opts.model_size, extra, opts.threads, overrides)
                for name, seed in jobs
            ]
            for future in futures:
                r = future.result()
                results.append(r)
                print(
                    f"| {r['family']} | {r['seed']} | {r['train']} | {r['steps']} | {r['before']:.2f} → {r['after']:.2f} "
                    f"| {r['train_s']:.0f} | {r['run_wall_s']:.0f} |",
                    flush=True,
                )
    finally:
        if opts.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print_family_means(results)


if __name__ == "__main__":
    main()
