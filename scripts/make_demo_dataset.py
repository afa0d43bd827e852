"""Generate ``datasets/demo``: a task a tiny model visibly learns in a few hundred steps.

The task is a deterministic text transformation: "Uppercase: red frog sun" -> "RED
FROG SUN", over a vocabulary of 12 short words, two or three words per prompt. The eval
split holds combinations that never appear in train (each of its words does), so an
exact match on eval shows the model learned the rule, not the lines. The base model,
untrained, scores about 0. The vocabulary is small on purpose: with LoRA r=8 over a
frozen random tiny model, each word's mapping costs adapter capacity; 12 words reached
0.83 exact match on eval (50 of 60) in 300 steps of batch 16; 30 words only about 0.3.

Run ``python scripts/make_demo_dataset.py`` to (re)write the folder; the output is
the same byte for byte on every run (seeded), so the dataset hash only changes when
this script does.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

WORDS = ["red", "blue", "cat", "dog", "frog", "fish", "sun", "snow", "tree", "rock", "lamp", "king"]
PREFIX = "Uppercase: "
SEED = 20261130
TRAIN_SIZE = 400
EVAL_SIZE = 60

SPEC = """\
name = "demo"
description = "Uppercase two or three words (a deterministic transformation a tiny model learns in ~300 steps)."
format = "chat"
train = ["train.jsonl"]
eval = ["eval.jsonl"]
"""


def example(words: tuple[str, ...]) -> dict[str, object]:
    return {
        "messages": [
            {"role": "user", "content": PREFIX + " ".join(words)},
            {"role": "assistant", "content": " ".join(word.upper() for word in words)},
        ]
    }


def combinations(rng: random.Random, count: int, seen: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """`count` new word tuples (2 or 3 distinct words), none already in `seen`."""
    found: list[tuple[str, ...]] = []
    while len(found) < count:
        words = tuple(rng.sample(WORDS, rng.choice((2, 3))))
        if words not in seen:
            seen.add(words)
            found.append(words)
    return found


def build(out: Path) -> None:
    rng = random.Random(SEED)
    seen: set[tuple[str, ...]] = set()
    train = combinations(rng, TRAIN_SIZE, seen)
    held_out = combinations(rng, EVAL_SIZE, seen)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dataset.toml").write_text(SPEC, encoding="utf-8")
    for name, rows in (("train.jsonl", train), ("eval.jsonl", held_out)):
        lines = [json.dumps(example(words), ensure_ascii=False) for words in rows]
        (out / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "datasets" / "demo")
    args = parser.parse_args()
    build(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
