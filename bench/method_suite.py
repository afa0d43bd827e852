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

GRPO families (a short SFT run learns the task in part: the shortest of `SFT_LENGTHS`
that reaches `HALF_LEARNT` on calibration prompts; GRPO on other prompts of the same task,
rewarded by a grader against each prompt's reference; measured as exact match of greedy
answers to 40 unseen prompts):

- ``translate``, ``lookup``, ``reverse`` with the built-in ``exact_match`` grader;
- ``translate-fuzzy``, ``reverse-fuzzy``: the same tasks with partial credit (OpenAI's
  ``text_similarity`` grader, ``fuzzy_match``).

    .venv/bin/python bench/method_suite.py dpo|grpo [--family NAME ...] [--seeds N] [--keep DIR] [--sft-steps N]
        [--variant OPTIONS ...] [-- OPTIONS]

Options after ``--`` go to the DPO or GRPO run (to try a recipe: ``-- --steps 120``); each
``--variant OPTIONS`` runs one more recipe from the same SFT start, to compare recipes on
equal starts.
Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
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
#: Lengths the short SFT run before GRPO may have (the tiny preset trains 400 by default).
#: The start is the shortest whose exact match on calibration prompts (neither SFT, GRPO nor
#: the measure sees them) reaches `HALF_LEARNT`, found by bisection from the longest: where a
#: task is learnt in part, as the suite's GRPO families ask, whatever the family, its size or
#: the tiny build. A task that the longest does not learn that far starts from the longest.
#: Fixed lengths per task (lookup 20, the others 200, chosen on build 3) started several
#: families at 0.00 and lookup at chance on build 4 (research log, 2026-12-07); a task's
#: score jumps within 50 steps (translate: under 0.25 at 100 steps, 0.85 at 200), hence the
#: fine steps of the grid. About half: at 0.25, 40 calibration prompts picked lookup starts
#: at chance (one value of eight) on the measure.
SFT_LENGTHS = [25, 50, 75, 100, 125, 150, 200, 250, 300, 400]
HALF_LEARNT = 0.4
#: Calibration prompts, taken from the task's training examples.
CALIBRATION = 40
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
    family: str,
    seed: int,
    detail: str,
    recipe: list[str],
    run: dict[str, Any],
    wall: float,
    before: float,
    after: float,
    extra: str,
) -> dict[str, Any]:
    """One line of the table: the method's run (options `recipe`) and the measure before and after it."""
    metrics = run.get("metrics") or {}
    return {
        "family": family,
        "seed": seed,
        "detail": detail,
        "recipe": " ".join(recipe) or "defaults",
        "status": run.get("status"),
        "steps": run.get("total_steps"),
        "before": before,
        "after": after,
        "extra": extra,
        "train_s": round(float(metrics.get("train_runtime_s", float("nan"))), 1),
        "run_wall_s": round(wall, 1),
    }


def dpo_one(family: str, seed: int, root: Path, env: dict[str, str], recipes: list[list[str]]) -> list[dict[str, Any]]:
    """Rows of each DPO recipe (options of `trainkit train`) from one SFT start."""
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
    results = []
    for recipe in recipes:
        wall = time.perf_counter()
        start = ["--from", f"trained/{base['id']}"]
        run = trainkit(env, "train", "--dataset", pref_name, "--method", "dpo", *start, *recipe)
        wall = time.perf_counter() - wall
        _, after = greedy_answers(env, f"trained/{run['id']}", sft_name)
        accuracy = (run.get("metrics") or {}).get("eval_preference_accuracy", float("nan"))
        detail = f"{content}, {share:.0%} styled, {len(pairs) - 20} pairs"
        before_share = sum(map(follows, before)) / len(before)
        after_share = sum(map(follows, after)) / max(1, len(after))
        extra = f"held-out preference accuracy {accuracy:.2f}"
        results.append(row(family, seed, detail, recipe, run, wall, before_share, after_share, extra))
    return results


def grpo_one(family: str, seed: int, root: Path, env: dict[str, str], recipes: list[list[str]]) -> list[dict[str, Any]]:
    """Rows of each GRPO recipe (options of `trainkit train`) from one calibrated SFT start."""
    task, _, grader = family.partition("-")
    rng = random.Random(f"grpo-{family}-{seed}")
    train, held_out = FAMILIES[task](rng, GRPO_SIZES[seed % len(GRPO_SIZES)])
    cut = min(GRPO_PROMPTS, len(train) // 3)
    prompts, calibration, train = train[:cut], train[cut : cut + CALIBRATION], train[cut + CALIBRATION :]
    name = f"{family}-{seed}"
    # The SFT runs' own end-of-run eval scores the calibration prompts; the measure is on `held_out`.
    sft_name = write(root / "datasets" / f"{name}-sft", "chat", chats(train), chats(calibration))
    measure_name = write(root / "datasets" / f"{name}-measure", "chat", chats(calibration), chats(held_out))
    rows = [{"messages": [user(p)], "reference": a} for p, a in prompts]
    prompt_name = write(root / "datasets" / f"{name}-prompts", "prompt", rows)
    for dataset in (sft_name, measure_name, prompt_name):
        trainkit(env, "sync", dataset)
    base, sft_steps, calibrated = half_learnt_start(env, sft_name)
    before, _ = greedy_answers(env, f"trained/{base['id']}", measure_name)
    if grader == "fuzzy":
        grader_file = root / "fuzzy.json"
        grader_file.write_text(json.dumps(FUZZY))
        rewards = ["--openai-grader", str(grader_file)]
    else:
        rewards = ["--reward", "exact_match"]
    detail = f"{len(train)} SFT examples ({sft_steps} steps, calibration {calibrated:.2f}), {len(prompts)} prompts"
    results = []
    for recipe in recipes:
        start = ["--from", f"trained/{base['id']}"]
        wall = time.perf_counter()
        run = trainkit(env, "train", "--dataset", prompt_name, "--method", "grpo", *start, *rewards, *recipe)
        wall = time.perf_counter() - wall
        after, _ = (
            greedy_answers(env, f"trained/{run['id']}", measure_name)
            if run.get("status") == "succeeded"
            else (float("nan"), [])
        )
        metrics = run.get("metrics") or {}
        first, last = metrics.get("reward_first", float("nan")), metrics.get("reward_last", float("nan"))
        zero = metrics.get("zero_advantage_share", float("nan"))
        extra = f"reward {first:.2f} → {last:.2f}, zero-advantage share {zero:.2f}"
        results.append(row(family, seed, detail, recipe, run, wall, before, after, extra))
    return results


def half_learnt_start(env: dict[str, str], sft_name: str) -> tuple[dict[str, Any], int, float]:
    """(run, steps, calibration exact match) of the shortest SFT run of `SFT_LENGTHS` that reaches `HALF_LEARNT`."""

    def calibrated(steps: int) -> tuple[dict[str, Any], float]:
        run = sft(env, sft_name, "--steps", str(steps))
        return run, float((run.get("metrics") or {}).get("eval_exact_match", float("nan")))

    best = SFT_LENGTHS[-1], *calibrated(SFT_LENGTHS[-1])
    low, high = 0, len(SFT_LENGTHS) - 1  # the shortest that reaches it is in SFT_LENGTHS[low : high + 1]
    while best[2] >= HALF_LEARNT and low < high:
        middle = (low + high) // 2
        run, score = calibrated(SFT_LENGTHS[middle])
        if score >= HALF_LEARNT:
            best, high = (SFT_LENGTHS[middle], run, score), middle
        else:
            low = middle + 1
    steps, run, score = best
    return run, steps, score


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
        "--sft-steps", type=int, help="GRPO: the SFT start's steps for every task, instead of the calibrated start."
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="OPTIONS",
        help="Another recipe run from the same start, e.g. --variant '--kl-coef 0.04' (repeatable).",
    )
    own, extra = split_at_dashes(sys.argv[1:])
    opts = parser.parse_args(own)
    recipes = [extra, *(shlex.split(v) for v in opts.variant)]
    if opts.sft_steps:
        SFT_LENGTHS[:] = [opts.sft_steps]  # the one length tried is the start, whatever it scores
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
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; {opts.method}; recipes: {[' '.join(r) or 'defaults' for r in recipes]}"
    )
    print()
    print(f"| family | seed | data | recipe | steps | {measure} before → after | | train s | run s |")
    print("|---|---|---|---|---|---|---|---|---|")
    results: list[dict[str, Any]] = []
    try:
        for family in opts.family or families:
            for seed in range(opts.seeds):
                for r in run_one(family, seed, root, env, recipes):
                    results.append(r)
                    print(
                        f"| {family} | {seed} | {r['detail']} | {r['recipe']} | {r['steps']} "
                        f"| {r['before']:.2f} → {r['after']:.2f} | {r['extra']} | {r['train_s']:.0f} | {r['run_wall_s']:.0f} |",
                        flush=True,
                    )
    finally:
        if opts.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    for recipe in dict.fromkeys(r["recipe"] for r in results):
        print()
        print(f"recipe: {recipe}")
        print_gains([r for r in results if r["recipe"] == recipe], measure)


def print_gains(results: list[dict[str, Any]], measure: str) -> None:
    """Each family's mean measure after the method and its gain; the suite's mean gain and worst family."""
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
