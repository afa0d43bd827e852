"""Generate the shipped DPO and GRPO demo datasets, ``demo-prefs`` and ``demo-prompts``.

They sit beside ``demo`` in ``trainkit_core/data/datasets/`` so that the preference and
reward tutorial (``docs/tutorials/preference-and-reward.md``) runs as written from any
folder. Both teach one house-style rule on top of the demo's task (the opposites): the
answer is a sentence, so it ends with a full stop. A model trained on ``demo`` never
writes one (no demo answer has it), which makes the rule's effect visible:

- ``demo-prefs`` (``format = "preference"``): a pair per prompt, preferring the right
  answer with its full stop over the same answer without it;
- ``demo-prompts`` (``format = "prompt"``): the prompts with that answer as
  ``reference``, for the ``exact_match`` grader (or ``contains``, ``regex``...).

The prompts are drawn (seeded) from the demo's train file; the eval pairs come from the
demo's eval file, prompts the SFT run never saw. The output is the same byte for byte
on every run. Run ``python scripts/make_method_datasets.py`` after ``make_demo_dataset.py``.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

SHIPPED = (
    Path(__file__).resolve().parents[1] / "packages" / "trainkit-core" / "src" / "trainkit_core" / "data" / "datasets"
)
PREFERENCE_TRAIN = 400
PREFERENCE_EVAL = 20
PROMPT_TRAIN = 200
SEED = 50


def _demo(folder: Path, file: str) -> list[tuple[str, str]]:
    rows = []
    for line in (folder / file).read_text().splitlines():
        messages = json.loads(line)["messages"]
        rows.append((messages[0]["content"], messages[1]["content"]))
    return rows


def _pair(prompt: str, answer: str) -> dict[str, Any]:
    return {
        "input": {"messages": [{"role": "user", "content": prompt}]},
        "preferred_output": [{"role": "assistant", "content": answer + "."}],
        "non_preferred_output": [{"role": "assistant", "content": answer}],
    }


def _write(folder: Path, spec: str, files: dict[str, list[dict[str, Any]]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.toml").write_text(spec)
    for name, records in files.items():
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def main(out: Path) -> None:
    train = _demo(out / "demo", "train.jsonl")
    held_out = _demo(out / "demo", "eval.jsonl")
    rng = random.Random(SEED)
    chosen = rng.sample(train, PREFERENCE_TRAIN + PROMPT_TRAIN)
    _write(
        out / "demo-prefs",
        'name = "demo-prefs"\n'
        'description = "The demo\'s opposites, preferring the answer that ends with a full stop (DPO)."\n'
        'format = "preference"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n',
        {
            "train.jsonl": [_pair(p, a) for p, a in chosen[:PREFERENCE_TRAIN]],
            "eval.jsonl": [_pair(p, a) for p, a in held_out[:PREFERENCE_EVAL]],
        },
    )
    _write(
        out / "demo-prompts",
        'name = "demo-prompts"\n'
        'description = "The demo\'s opposites as prompts; reference: the answer with a full stop (GRPO)."\n'
        'format = "prompt"\ntrain = ["train.jsonl"]\n',
        {
            "train.jsonl": [
                {"messages": [{"role": "user", "content": p}], "reference": a + "."}
                for p, a in chosen[PREFERENCE_TRAIN:]
            ]
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SHIPPED, help="the folder holding demo/ (default: trainkit-core's)")
    main(parser.parse_args().out)
