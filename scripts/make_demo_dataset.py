"""Generate the demo dataset (shipped in trainkit-core, ``trainkit_core/data/datasets/demo``; ``datasets/demo`` links to it): a task a tiny model visibly learns in about a minute on a CPU.

The task is word-by-word substitution through a fixed dictionary of opposites:
"Opposites: hot early loud" -> "cold late quiet". The dictionary holds 30 pairs, so 60
distinct words (every word is both a question and an answer), two to four words per
prompt. The eval split holds combinations that never appear in train (each of its
words does, in both directions), so an exact match on eval shows the model learned the
rule word by word, not the lines. The base model, untrained, scores 0.

The tiny preset's defaults reach about 0.9 exact match on eval here (the figures, per
recipe, are in ``docs/concepts/model-sizes.md``, printed by ``bench/bench_tiny_recipes.py``).

Run ``python scripts/make_demo_dataset.py`` to (re)write the folder; the output is
the same byte for byte on every run (seeded), so the dataset hash only changes when
this script does.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

PAIRS = (
    ("hot", "cold"),
    ("big", "small"),
    ("fast", "slow"),
    ("up", "down"),
    ("left", "right"),
    ("open", "closed"),
    ("day", "night"),
    ("old", "young"),
    ("good", "bad"),
    ("happy", "sad"),
    ("light", "dark"),
    ("high", "low"),
    ("wet", "dry"),
    ("full", "empty"),
    ("rich", "poor"),
    ("hard", "soft"),
    ("early", "late"),
    ("near", "far"),
    ("strong", "weak"),
    ("loud", "quiet"),
    ("long", "short"),
    ("thick", "thin"),
    ("clean", "dirty"),
    ("first", "last"),
    ("black", "white"),
    ("push", "pull"),
    ("buy", "sell"),
    ("north", "south"),
    ("east", "west"),
    ("win", "lose"),
)
#: Each word's opposite, both ways.
OPPOSITE = {a: b for a, b in PAIRS} | {b: a for a, b in PAIRS}
WORDS = sorted(OPPOSITE)
PREFIX = "Opposites: "
SEED = 20261201
LENGTHS = (2, 3, 4)
TRAIN_SIZE = 4000
EVAL_SIZE = 100

SPEC = """\
name = "demo"
description = "Opposites, word by word: 'Opposites: hot early loud' -> 'cold late quiet' (60 words; eval holds unseen combinations)."
format = "chat"
train = ["train.jsonl"]
eval = ["eval.jsonl"]
"""


def answer(words: tuple[str, ...]) -> str:
    return " ".join(OPPOSITE[word] for word in words)


def example(words: tuple[str, ...]) -> dict[str, object]:
    return {
        "messages": [
            {"role": "user", "content": PREFIX + " ".join(words)},
            {"role": "assistant", "content": answer(words)},
        ]
    }


def combinations(rng: random.Random, count: int, seen: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """`count` new word tuples (2 to 4 distinct words), none already in `seen`."""
    found: list[tuple[str, ...]] = []
    while len(found) < count:
        words = tuple(rng.sample(WORDS, rng.choice(LENGTHS)))
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
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "packages/trainkit-core/src/trainkit_core/data/datasets/demo",
    )
    args = parser.parse_args()
    build(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
