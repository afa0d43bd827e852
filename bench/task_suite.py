"""A suite of text tasks nobody tuned trainkit on: the `tiny` preset's defaults, judged by the worst family.

Why: a recipe chosen on the demo it is shown with says nothing about a user's data. This
script generates families of SFT text tasks, each in several seeds whose vocabulary,
answer length and number of training examples (300 to 3,000) differ, and runs each
through what a new user runs: ``trainkit train --dataset NAME`` with the defaults on the
local provider, whose run scores the eval split at its end (examples whose input never
appears in training). It prints, per family and seed, exact match before
(the base) and after, and the training time; then each family's mean and the suite's
mean and worst family.

Families (every one generalises: the eval inputs are new combinations of what training
shows, never new words):

- ``translate``: a made-up lexicon, sentences of 2-5 words translated word by word;
- ``reverse``: lists of 3-6 made-up words, answered in reverse order;
- ``copy``: lists of 3-7 made-up words, repeated as they are;
- ``arith``: sums or differences of two numbers below 20-100 (which one per seed);
- ``lookup``: a table of objects and their attribute, asked in several phrasings; the
  eval asks in phrasings that training never paired with that object.

Words are made of syllables drawn per seed, so no word of the suite is an English word
and no tokenizer corpus can hold them.

    .venv/bin/python bench/task_suite.py [--family NAME ...] [--seeds N] [--keep DIR]

Each run takes minutes on one CPU thread; the whole default suite (5 families x 3 seeds)
about an hour on a quiet 2-core machine. Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_tiny_recipes import machine  # the same machine line as the tiny recipe bench

REPO = Path(__file__).resolve().parent.parent
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
Example = tuple[str, str]


def words(rng: random.Random, count: int) -> list[str]:
    """`count` distinct made-up words of 2-3 syllables."""
    found: set[str] = set()
    while len(found) < count:
        found.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(found)


def split(
    rng: random.Random, make: Callable[[], Example], train: int, held_out: int
) -> tuple[list[Example], list[Example]]:
    """Distinct examples; the eval inputs never appear in training."""
    seen: dict[str, str] = {}
    tries = 0
    while len(seen) < train + held_out:
        prompt, answer = make()
        seen.setdefault(prompt, answer)
        tries += 1
        if tries > 200 * (train + held_out):
            raise SystemExit("the family cannot make that many distinct examples; lower the size")
    items = list(seen.items())
    rng.shuffle(items)
    return items[held_out:], items[:held_out]


def translate(rng: random.Random, size: int) -> tuple[list[Example], list[Example]]:
    source = words(rng, rng.choice([30, 60, 120]))
    target = words(rng, len(source) * 2)
    rng.shuffle(target)
    lexicon = dict(zip(source, target, strict=False))

    def make() -> Example:
        sentence = [rng.choice(source) for _ in range(rng.randint(2, 5))]
        return "Translate: " + " ".join(sentence), " ".join(lexicon[w] for w in sentence)

    return split(rng, make, size, 40)


def reverse(rng: random.Random, size: int) -> tuple[list[Example], list[Example]]:
    vocab = words(rng, rng.choice([20, 50, 100]))

    def make() -> Example:
        items = rng.sample(vocab, rng.randint(3, 6))
        return "Reverse: " + " ".join(items), " ".join(reversed(items))

    return split(rng, make, size, 40)


def copy(rng: random.Random, size: int) -> tuple[list[Example], list[Example]]:
    vocab = words(rng, rng.choice([20, 50, 100]))

    def make() -> Example:
        items = [rng.choice(vocab) for _ in range(rng.randint(3, 7))]
        return "Repeat: " + " ".join(items), " ".join(items)

    return split(rng, make, size, 40)


def arith(rng: random.Random, size: int) -> tuple[list[Example], list[Example]]:
    limit = rng.choice([20, 50, 100])
    subtract = rng.random() < 0.5

    def make() -> Example:
        a, b = rng.randrange(limit), rng.randrange(limit)
        if subtract:
            a, b = max(a, b), min(a, b)
            return f"What is {a} minus {b}?", str(a - b)
        return f"What is {a} plus {b}?", str(a + b)

    return split(rng, make, min(size, limit * limit - 40), 40)


def lookup(rng: random.Random, size: int) -> tuple[list[Example], list[Example]]:
    objects = words(rng, rng.choice([40, 80]))
    values = words(rng, 8)
    table = {o: rng.choice(values) for o in objects}
    phrasings = [
        "What colour is the {}?",
        "Which colour does the {} have?",
        "Tell me the colour of the {}.",
        "The {} is which colour?",
        "Colour of the {}?",
        "Name the colour of the {}.",
    ]
    # Every object is asked in some phrasings in training and in another one in the eval.
    pairs = [(o, p) for o in objects for p in phrasings]
    rng.shuffle(pairs)
    held = {}
    for o, p in pairs:
        held.setdefault(o, p)
    evals = [(held[o].format(o), table[o]) for o in objects][:40]
    train_pairs = [(o, p) for o, p in pairs if held[o] != p]
    train = [(p.format(o), table[o]) for o, p in train_pairs]
    return train[:size], evals


FAMILIES: dict[str, Callable[[random.Random, int], tuple[list[Example], list[Example]]]] = {
    "translate": translate,
    "reverse": reverse,
    "copy": copy,
    "arith": arith,
    "lookup": lookup,
}
SIZES = [300, 1000, 3000]


def chat(prompt: str, answer: str) -> str:
    return json.dumps({"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]})


def write_dataset(folder: Path, name: str, train: list[Example], held_out: list[Example]) -> None:
    folder.mkdir(parents=True)
    (folder / "dataset.toml").write_text(
        f'name = "{name}"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )
    (folder / "train.jsonl").write_text("".join(chat(p, a) + "\n" for p, a in train))
    (folder / "eval.jsonl").write_text("".join(chat(p, a) + "\n" for p, a in held_out))


def trainkit(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", *args, "--json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"trainkit {' '.join(args)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    return dict(json.loads(done.stdout[done.stdout.index("{") :]))


#: Trains through `start_run`, as the CLI does, with TrainConfig fields the CLI has no option for.
CHILD = """
import json, sys
from trainkit_core import get_provider
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.submit import start_run
run = start_run(get_provider("local"), TrainConfig.parse(json.loads(sys.argv[1])))
print(json.dumps(run.wait().model_dump(mode="json")))
"""


def train_with(env: dict[str, str], config: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(config)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"training {config} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run_one(family: str, seed: int, root: Path, extra: list[str], overrides: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(f"{family}-{seed}")
    size = SIZES[seed % len(SIZES)]
    train, held_out = FAMILIES[family](rng, size)
    name = f"{family}-{seed}"
    datasets = root / "datasets"
    write_dataset(datasets / name, name, train, held_out)
    env = {
        **os.environ,
        "TRAINKIT_HOME": str(root / "home"),
        "TRAINKIT_DATASETS_DIR": str(datasets),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    trainkit(env, "sync", name)
    wall = time.perf_counter()
    if overrides:
        run = train_with(env, {"dataset": name, "model_size": "tiny", **overrides})
    else:
        run = trainkit(env, "train", "--dataset", name, "--model-size", "tiny", *extra)
    wall = time.perf_counter() - wall
    metrics = run.get("metrics") or {}
    return {
        "family": family,
        "seed": seed,
        "train": len(train),
        "eval": len(held_out),
        "status": run.get("status"),
        "steps": run.get("total_steps"),
        "before": metrics.get("base_eval_exact_match", float("nan")),
        "after": metrics.get("eval_exact_match", float("nan")),
        "f1": metrics.get("eval_f1", float("nan")),
        "train_s": round(float(metrics.get("train_runtime_s", float("nan"))), 1),
        "run_wall_s": round(wall, 1),
    }


def split_at_dashes(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the script's own options, the options after ``--`` for the runs it starts)."""
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    return argv[:at], argv[at + 1 :]


def print_family_means(results: list[dict[str, Any]]) -> None:
    """Each family's mean exact match after training, then the suite's mean and its worst family."""
    means = {}
    for family in dict.fromkeys(r["family"] for r in results):
        scores = [r["after"] for r in results if r["family"] == family]
        means[family] = sum(scores) / len(scores)
        print(f"{family}: mean exact match {means[family]:.2f}")
    if means:
        worst = min(means, key=means.__getitem__)
        print(f"suite: mean {sum(means.values()) / len(means):.2f}, worst family {worst} {means[worst]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", nargs="*", choices=list(FAMILIES), help="Families to run (default: all).")
    parser.add_argument("--seeds", type=int, default=3, help="Seeds per family (sizes cycle 300, 1000, 3000).")
    parser.add_argument("--keep", type=Path, help="Keep datasets and runs in this folder (default: a temporary one).")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=JSON",
        help="A TrainConfig field for every run (e.g. modules_to_save='[\"embed_tokens\"]'); trains through the API.",
    )
    parser.add_argument("extra", nargs="*", help="Options passed to `trainkit train` after `--`, to try a recipe.")
    opts = parser.parse_args()
    overrides = {k: json.loads(v) for k, _, v in (s.partition("=") for s in opts.set)}
    root = opts.keep or Path(tempfile.mkdtemp(prefix="trainkit-suite-"))
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; trainkit train {' '.join(opts.extra)} {overrides or ''}"
    )
    print()
    print("| family | seed | train / eval | steps | exact match before → after | token F1 | train s | run s |")
    print("|---|---|---|---|---|---|---|---|")
    results: list[dict[str, Any]] = []
    try:
        for family in opts.family or list(FAMILIES):
            for seed in range(opts.seeds):
                r = run_one(family, seed, root, opts.extra, overrides)
                results.append(r)
                print(
                    f"| {family} | {seed} | {r['train']} / {r['eval']} | {r['steps']} "
                    f"| {r['before']:.2f} → {r['after']:.2f} | {r['f1']:.2f} | {r['train_s']:.0f} | {r['run_wall_s']:.0f} |",
                    flush=True,
                )
    finally:
        if opts.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print_family_means(results)


if __name__ == "__main__":
    main()
