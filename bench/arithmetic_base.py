"""A `tiny` base taught sums and differences as well as copying, to see whether arithmetic is a prior it lacks.

Why: the text suite's worst family (`task_suite.py`'s ``arith``: "What is 37 plus 58?" over
300-3,000 examples) stays at 0.03-0.85 exact match even at four times the preset's steps.
A real base model brings arithmetic from pretraining, as it brings copying, which the tiny
base is taught when it is built (`trainkit_core.models.copying_lesson`). This script builds
the base as build 4 does, then gives it a second lesson on plain arithmetic written with
digits and symbols only ("37+58=95", "12 - 40 = -28", between random ids), never the
suite's words or questions, and writes it where a trainkit home keeps the tiny base, so that
`task_suite.py --keep DIR` fine-tunes it:

    .venv/bin/python bench/arithmetic_base.py DIR/home [--steps N] [--lr R] [--copy-rows K] [--noise N]
    .venv/bin/python bench/task_suite.py --family arith --keep DIR

Digits are tokens of their own with fixed ids in every tokenizer trained here (the
byte alphabet comes first), so the lesson holds for any dataset's tokenizer. The lesson's
batches mix copying spans back in, so that the first lesson is not forgotten. Not a
default: a measurement (research log, "An arithmetic lesson for the tiny base").
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from trainkit_core.models import copying_lesson

STEPS = 3000
LEARNING_RATE = 3e-3
SEED = 0
#: Rows of each batch of `copying_lesson.BATCH` that copy spans again; the rest hold problems.
COPY_ROWS = copying_lesson.BATCH // 2
#: At most this many random ids before each problem.
NOISE = 6
#: At least this many: with 0, a problem may follow the previous result directly
#: ("...=95" then "12+40=" reads as "9512+40=").
MIN_NOISE = 0


def problem(rng: random.Random) -> tuple[str, str]:
    """An addition or subtraction of numbers below 100 (sometimes 1000), in one of a few spellings."""
    limit = rng.choice([10, 100, 100, 100, 1000])
    a, b = rng.randrange(limit), rng.randrange(limit)
    op = rng.choice("+-")
    result = a + b if op == "+" else a - b
    space = rng.choice(["", " "])
    return f"{a}{space}{op}{space}{b}{space}=", f"{space}{result}"


def char_ids(tokenizer: Any, text: str) -> list[int]:
    """One id per character (a space is the byte-level 'Ġ'): the ids every tokenizer built here gives them.

    Merged tokens (say "Ġ=") differ between tokenizers, single characters do not, and a
    run's tokenizer splits digits one by one, so a number is written the same in both.
    """
    return [tokenizer.convert_tokens_to_ids("Ġ" if c == " " else c) for c in text]


def arithmetic_batch(
    rng: random.Random,
    tokenizer: Any,
    first_id: int,
    vocab_size: int,
    batch: int,
    noise: int = NOISE,
    min_noise: int = MIN_NOISE,
) -> tuple[list[list[int]], list[list[int]]]:
    """Rows (beginning of text, then random ids holding problems); labels on each problem's result only."""
    length = copying_lesson.LENGTH
    # Noise never holds a digit or a sign, which would run into a problem's numbers.
    reserved = set(char_ids(tokenizer, "0123456789+-= "))
    pool = [i for i in range(first_id, vocab_size) if i not in reserved]
    rows, labels = [], []
    for _ in range(batch):
        ids, label = [tokenizer.bos_token_id], [-100]
        while True:
            filler = [rng.choice(pool) for _ in range(rng.randint(min_noise, max(noise, min_noise)))]
            question, answer = problem(rng)
            q, a = char_ids(tokenizer, question), char_ids(tokenizer, answer)
            if len(ids) + len(filler) + len(q) + len(a) > length:
                break
            ids += filler + q + a
            label += [-100] * (len(filler) + len(q)) + a
        pad = length - len(ids)
        rows.append(ids + [rng.choice(pool) for _ in range(pad)])
        labels.append(label + [-100] * pad)
    return rows, labels


def teach_arithmetic(
    model: Any,
    tokenizer: Any,
    first_id: int,
    vocab_size: int,
    steps: int,
    learning_rate: float = LEARNING_RATE,
    copy_rows: int = COPY_ROWS,
    noise: int = NOISE,
    min_noise: int = MIN_NOISE,
) -> dict[str, float]:
    """Every weight trained on rows of problems and rows of copying; accuracy of result tokens on held-out rows."""
    import torch

    torch.set_num_threads(1)
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    bos = tokenizer.bos_token_id

    def batch() -> tuple[Any, Any]:
        rows, labels = arithmetic_batch(
            rng, tokenizer, first_id, vocab_size, copying_lesson.BATCH - copy_rows, noise, min_noise
        )
        copy_ids, copy_labels = copying_lesson.recurring_spans(rng, first_id, vocab_size, copy_rows)
        return copying_lesson.as_tensors(rows + copy_ids, labels + copy_labels, bos)

    copying_lesson.train_on(model, batch, steps, learning_rate=learning_rate)
    held = arithmetic_batch(random.Random(SEED + 1), tokenizer, first_id, vocab_size, 64)  # the same for every lesson
    return {
        "result_token_accuracy": round(copying_lesson.copy_accuracy(model, *copying_lesson.as_tensors(*held, bos)), 4),
        "copy_accuracy": round(
            copying_lesson.copy_accuracy(model, *copying_lesson.held_out_batch(first_id, vocab_size, bos)), 4
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path, help="The trainkit home whose hf-cache volume gets the base.")
    parser.add_argument("--steps", type=int, default=STEPS, help="Steps of the arithmetic lesson.")
    parser.add_argument("--lr", type=float, default=LEARNING_RATE, help="Its peak learning rate.")
    parser.add_argument("--copy-rows", type=int, default=COPY_ROWS, help="Copying rows of each batch of 16.")
    parser.add_argument("--noise", type=int, default=NOISE, help="At most this many random ids before a problem.")
    parser.add_argument("--min-noise", type=int, default=MIN_NOISE, help="At least this many random ids before one.")
    parser.add_argument("--base", type=Path, help="A built build-4 base to start from (else it is built, 95 s).")
    opts = parser.parse_args()

    from copying_base import empty_base_folder

    from trainkit_core.models.tiny_model import VOCAB_SIZE, build_base, first_plain_id

    target = empty_base_folder(opts.home)
    if opts.base:
        shutil.copytree(opts.base, target, dirs_exist_ok=True)
    else:
        build_base(target)  # build 4: the random model and the copying lesson

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(target)
    tokenizer = AutoTokenizer.from_pretrained(target)
    started = time.perf_counter()
    lesson = teach_arithmetic(
        model,
        tokenizer,
        first_plain_id(tokenizer),
        VOCAB_SIZE,
        opts.steps,
        opts.lr,
        opts.copy_rows,
        opts.noise,
        opts.min_noise,
    )
    lesson["seconds"] = round(time.perf_counter() - started, 1)
    model.save_pretrained(target)
    info = json.loads((target / "trainkit_tiny.json").read_text())
    info["arithmetic_lesson"] = {
        **lesson,
        "steps": opts.steps,
        "lr": opts.lr,
        "copy_rows": opts.copy_rows,
        "noise": opts.noise,
        "min_noise": opts.min_noise,
    }
    (target / "trainkit_tiny.json").write_text(json.dumps(info, indent=2))
    print(f"{target}: {info['copying_lesson']} then {info['arithmetic_lesson']}", file=sys.stderr)


if __name__ == "__main__":
    main()
