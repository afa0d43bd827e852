"""DPO and GRPO on tasks nobody tuned trainkit on: the `tiny` preset's method defaults, judged by the worst family.

Why: the DPO and GRPO defaults for `tiny` were chosen on the tutorials' full-stop rule
(tests/core/methods_demo.py), which says nothing about a user's preference or grader.
This script generates families of both, in several seeds whose vocabulary, sizes and
the share of the preferred style in the SFT data differ, and runs each as a user would:
an SFT run with the defaults, then ``trainkit train --method dpo|grpo --from`` it with
the method's defaults. It prints, per family and seed, the measure before (the SFT
model) and after, and the training time; then each family's mean and the worst family.

DPO families (a style the SFT data shows in 5-30 % of its answers, so the SFT model
knows it and rarely uses it; measured as the share of greedy answers to 40 unseen
prompts that follow it):

- ``suffix``: the answer ends with a closing word (a made-up word per seed);
- ``prefix``: the answer starts with a made-up word and a colon;
- ``brackets``: the answer is wrapped in a pair of brackets (which pair per seed);
- ``commas``: the words of the answer are separated by commas;
- ``capitals``: every word of the answer starts with a capital (so every token differs).

The content under the style is one of the text suite's families (`task_suite.py`:
translate, lookup, reverse, by seed).

GRPO families (a short SFT run learns the task in part; GRPO on other prompts of the
same task, rewarded by a grader against each prompt's reference; measured as exact
match of greedy answers to 40 unseen prompts):

- ``translate``, ``lookup``, ``reverse`` with the built-in ``exact_match`` grader;
- ``translate-fuzzy``, ``reverse-fuzzy``: the same tasks with partial credit (OpenAI's
  ``text_similarity`` grader, ``fuzzy_match``).

    .venv/bin/python bench/method_suite.py dpo|grpo [--family NAME ...] [--seeds N] [--keep DIR] [--sft-steps N] [-- OPTIONS]

Options after ``--`` go to the DPO or GRPO run (to try a recipe: ``-- --steps 120``).
Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_tiny_recipes import machine
from task_suite import FAMILIES, Example, split_at_dashes, trainkit, words

#: The content families under the DPO styles, by seed.
DPO_CONTENT = ["translate", "lookup", "reverse"]
#: Share of the SFT answers written in the preferred style, by seed.
STYLE_SHARE = [0.05, 0.15, 0.3]
#: Preference pairs, by seed.
PAIRS = [200, 400, 800]
#: Training examples of the GRPO families' tasks, by seed (SFT takes most, GRPO the rest).
GRPO_SIZES = [300, 1000]
#: Steps of the short SFT run before GRPO, by task (the tiny preset trains 400 by default):
#: about where each task is learnt in part on tiny build 4. Lookup is at chance (0.10-0.15,
#: one value of eight) up to 60 steps, 0.20-0.35 at 100 and 0.88-0.97 at 150; at 20 (the
#: earlier choice, made on build 3) nearly every group scored alike (research log, 2026-12-07).
GRPO_SFT_STEPS = {"translate": 200, "reverse": 200, "lookup": 100}
#: Prompts GRPO trains on (none of them in the SFT run; a third of a small task's examples at most).
GRPO_PROMPTS = 200
FUZZY = {
    "type": "text_similarity",
    "name": "fuzzy",
    "input": "{{sample.output_text}}",
    "reference": "{{item.reference}}",
    "evaluation_metric": "fuzzy_match",
}

Style = tuple[Callable[[str], str], Callable[[str], bool]]


def style(family: str, rng: random.Random) -> Style:
    """(write an answer in the preferred style, does an answer follow it)."""
    if family == "suffix":
        word = words(rng, 1)[0]
        return (lambda a: f"{a} {word}"), (lambda t: t.strip().endswith(" " + word))
    if family == "prefix":
        word = words(rng, 1)[0].capitalize()
        return (lambda a: f"{word}: {a}"), (lambda t: t.strip().startswith(word + ":"))
    if family == "brackets":
        left, right = rng.choice(["()", "[]", "{}", "<>"])
        return (lambda a: f"{left}{a}{right}"), (lambda t: t.strip().startswith(left) and t.strip().endswith(right))
    if family == "capitals":
        return (lambda a: " ".join(w.capitalize() for w in a.split())), (
            lambda t: bool(t.split()) and all(w[:1].isupper() for w in t.split())
        )
    if family == "commas":
        return (lambda a: ", ".join(a.split())), (lambda t: t.count(", ") >= 1 and t.count(" ") == t.count(", "))
    raise ValueError(family)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def write(folder: Path, fmt: str, train: list[dict[str, Any]], held_out: list[dict[str, Any]] | None = None) -> str:
    folder.mkdir(parents=True)
    spec = f'name = "{folder.name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\n'
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    if held_out:
        spec += 'eval = ["eval.jsonl"]\n'
        (folder / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held_out))
    (folder / "dataset.toml").write_text(spec)
    return folder.name


def chats(examples: list[Example]) -> list[dict[str, Any]]:
    return [{"messages": [user(p), assistant(a)]} for p, a in examples]


def greedy_answers(env: dict[str, str], model: str, dataset: str) -> tuple[float, list[str]]:
    """(exact match, greedy answers) of a trained model on a dataset's eval split."""
    report = trainkit(env, "eval", "run", "--model-path", model, "--dataset", dataset, "--no-base")
    shown = trainkit(env, "eval", "show", report["report_id"], "--examples")
    return float(report["tuned"]["exact_match"]), [str(r["tuned"]["answer"]) for r in shown["examples"]]


def sft(env: dict[str, str], dataset: str, *args: str) -> dict[str, Any]:
    run = trainkit(env, "train", "--dataset", dataset, "--model-size", "tiny", *args)
    if run.get("status") != "succeeded":
        raise RuntimeError(f"SFT on {dataset}: {run.get('status')} {run.get('error_message')}")
    return run


def row(
    family: str, seed: int, detail: str, run: dict[str, Any], wall: float, before: float, after: float, extra: str
) -> dict[str, Any]:
    """One line of the table: the method's run and the measure before and after it."""
    metrics = run.get("metrics") or {}
    return {
        "family": family,
        "seed": seed,
        "detail": detail,
        "status": run.get("status"),
        "steps": run.get("total_steps"),
        "before": before,
        "after": after,
        "extra": extra,
        "train_s": round(float(metrics.get("train_runtime_s", float("nan"))), 1),
        "run_wall_s": round(wall, 1),
    }


def dpo_one(family: str, seed: int, root: Path, env: dict[str, str], extra: list[str]) -> dict[str, Any]:
    rng = random.Random(f"dpo-{family}-{seed}")
    content = DPO_CONTENT[seed % len(DPO_CONTENT)] if family != "commas" else ["translate", "reverse"][seed % 2]
    train, held_out = FAMILIES[content](rng, 3000 if content != "lookup" else 400)
    styled, follows = style(family, rng)
    share = STYLE_SHARE[seed % len(STYLE_SHARE)]
    name = f"{family}-{seed}"
    sft_rows = [(p, styled(a) if rng.random() < share else a) for p, a in train]
    sft_name = write(
        root / "datasets" / f"{name}-sft", "chat", chats(sft_rows), chats([(p, styled(a)) for p, a in held_out])
    )
    pairs = [
        {
            "input": {"messages": [user(p)]},
            "preferred_output": [assistant(styled(a))],
            "non_preferred_output": [assistant(a)],
        }
        for p, a in rng.sample(train, min(PAIRS[seed % len(PAIRS)], len(train)))
    ]
    pref_name = write(root / "datasets" / f"{name}-pref", "preference", pairs[:-20], pairs[-20:])
    for dataset in (sft_name, pref_name):
        trainkit(env, "sync", dataset)
    base = sft(env, sft_name)
    _, before = greedy_answers(env, f"trained/{base['id']}", sft_name)
    wall = time.perf_counter()
    run = trainkit(env, "train", "--dataset", pref_name, "--method", "dpo", "--from", f"trained/{base['id']}", *extra)
    wall = time.perf_counter() - wall
    _, after = greedy_answers(env, f"trained/{run['id']}", sft_name)
    accuracy = (run.get("metrics") or {}).get("eval_preference_accuracy", float("nan"))
    detail = f"{content}, {share:.0%} styled, {len(pairs) - 20} pairs"
    before_share, after_share = sum(map(follows, before)) / len(before), sum(map(follows, after)) / max(1, len(after))
    return row(
        family, seed, detail, run, wall, before_share, after_share, f"held-out preference accuracy {accuracy:.2f}"
    )


def grpo_one(family: str, seed: int, root: Path, env: dict[str, str], extra: list[str]) -> dict[str, Any]:
    task, _, grader = family.partition("-")
    rng = random.Random(f"grpo-{family}-{seed}")
    train, held_out = FAMILIES[task](rng, GRPO_SIZES[seed % len(GRPO_SIZES)])
    cut = min(GRPO_PROMPTS, len(train) // 3)
    prompts, train = train[:cut], train[cut:]
    name = f"{family}-{seed}"
    sft_name = write(root / "datasets" / f"{name}-sft", "chat", chats(train), chats(held_out))
    rows = [{"messages": [user(p)], "reference": a} for p, a in prompts]
    prompt_name = write(root / "datasets" / f"{name}-prompts", "prompt", rows)
    for dataset in (sft_name, prompt_name):
        trainkit(env, "sync", dataset)
    base = sft(env, sft_name, "--steps", str(GRPO_SFT_STEPS[task]))
    before, _ = greedy_answers(env, f"trained/{base['id']}", sft_name)
    if grader == "fuzzy":
        grader_file = root / "fuzzy.json"
        grader_file.write_text(json.dumps(FUZZY))
        rewards = ["--openai-grader", str(grader_file)]
    else:
        rewards = ["--reward", "exact_match"]
    wall = time.perf_counter()
    run = trainkit(
        env, "train", "--dataset", prompt_name, "--method", "grpo", "--from", f"trained/{base['id']}", *rewards, *extra
    )
    wall = time.perf_counter() - wall
    after, _ = (
        greedy_answers(env, f"trained/{run['id']}", sft_name)
        if run.get("status") == "succeeded"
        else (float("nan"), [])
    )
    metrics = run.get("metrics") or {}
    reward = f"reward {metrics.get('reward_first', float('nan')):.2f} → {metrics.get('reward_last', float('nan')):.2f}"
    zero = f"zero-advantage share {metrics.get('zero_advantage_share', float('nan')):.2f}"
    detail = f"{len(train)} SFT examples, {len(prompts)} prompts"
    return row(family, seed, detail, run, wall, before, after, f"{reward}, {zero}")


SUITES = {
    "dpo": (["suffix", "prefix", "brackets", "commas", "capitals"], dpo_one, "preferred style"),
    "grpo": (["translate", "lookup", "reverse", "translate-fuzzy", "reverse-fuzzy"], grpo_one, "exact match"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method", choices=list(SUITES))
    parser.add_argument("--family", nargs="*", help="Families to run (default: all of the method's).")
    parser.add_argument("--seeds", type=int, default=2, help="Seeds per family.")
    parser.add_argument("--keep", type=Path, help="Keep datasets and runs in this folder (default: a temporary one).")
    parser.add_argument(
        "--sft-steps", type=int, help="GRPO: the SFT start's steps for every task (to see where it half-learns)."
    )
    own, extra = split_at_dashes(sys.argv[1:])
    opts = parser.parse_args(own)
    opts.extra = extra
    if opts.sft_steps:
        GRPO_SFT_STEPS.update(dict.fromkeys(GRPO_SFT_STEPS, opts.sft_steps))
    families, run_one, measure = SUITES[opts.method]
    unknown = set(opts.family or []) - set(families)
    if unknown:
        parser.error(f"unknown {opts.method} families: {', '.join(sorted(unknown))} (known: {', '.join(families)})")
    root = opts.keep or Path(tempfile.mkdtemp(prefix="trainkit-method-suite-"))
    env = {
        **os.environ,
        "TRAINKIT_HOME": str(root / "home"),
        "TRAINKIT_DATASETS_DIR": str(root / "datasets"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; {opts.method} {' '.join(opts.extra)}")
    print()
    print(f"| family | seed | data | steps | {measure} before → after | | train s | run s |")
    print("|---|---|---|---|---|---|---|---|")
    results: list[dict[str, Any]] = []
    try:
        for family in opts.family or families:
            for seed in range(opts.seeds):
                r = run_one(family, seed, root, env, opts.extra)
                results.append(r)
                print(
                    f"| {family} | {seed} | {r['detail']} | {r['steps']} | {r['before']:.2f} → {r['after']:.2f} "
                    f"| {r['extra']} | {r['train_s']:.0f} | {r['run_wall_s']:.0f} |",
                    flush=True,
                )
    finally:
        if opts.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print()
    gains = {}
    for family in dict.fromkeys(r["family"] for r in results):
        mine = [r for r in results if r["family"] == family]
        after = sum(r["after"] for r in mine) / len(mine)
        gains[family] = after - sum(r["before"] for r in mine) / len(mine)
        print(f"{family}: mean {measure} after {after:.2f}, gain {gains[family]:+.2f}")
    if gains:
        worst = min(gains, key=gains.__getitem__)
        print(f"suite: mean gain {sum(gains.values()) / len(gains):+.2f}, worst family {worst} {gains[worst]:+.2f}")


if __name__ == "__main__":
    main()
