"""The tool demo's eval calls, read one by one: what kind of mistake each wrong call makes.

Why: tool-call accuracy says how many calls were right, not what the model failed to
learn. This script trains the tutorial's run (``trainkit train --dataset demo-tools
--model-size tiny --max-seq-length 512 --steps 800``, or a TrainConfig with ``--set``
overrides), loads the trained adapter as inference does, asks it for the first call of
each eval conversation (the run's own eval, `score_calls`), and sorts the wrong ones:

- ``function``: the wrong function, or no call that parses;
- ``digits in the wrong order``: the value holds the user's digits, permuted;
- ``other digits``: the value holds other digits;
- ``units``: the value right, ``from_unit`` or ``to_unit`` wrong.

It prints the counts, the accuracy and the training time, then each wrong call. With
``--heads`` it also prints, per attention head, the share of attention that the user's
digits give the token just before them (a previous-token head, half of the usual copying
circuit, gives it most of theirs) and the token two before.

    .venv/bin/python bench/tool_demo.py [--set FIELD=JSON ...] [--keep DIR] [--heads]
    .venv/bin/python bench/tool_demo.py --heads --keep DIR --reuse   # a kept run, not trained again

One run takes about 9 minutes of training on one thread of the 2-core machine.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_tiny_recipes import machine
from task_suite import train_with  # trains through `start_run`, as the CLI does, with any TrainConfig field

#: The tutorial's run (docs/tutorials/tool-calling.md).
TUTORIAL = {"dataset": "demo-tools", "model_size": "tiny", "max_seq_length": 512, "steps": 800}


def kind_of_mistake(wanted: tuple[str, dict[str, Any]], made: list[tuple[str, Any]]) -> str:
    """One of the module docstring's kinds, for a call that is not right."""
    name, arguments = wanted
    if len(made) != 1 or made[0][0] != name or not isinstance(made[0][1], dict):
        return "function"
    got = made[0][1]
    value, got_value = str(arguments.get("value")), str(got.get("value"))
    if got_value != value:
        return "digits in the wrong order" if sorted(got_value) == sorted(value) else "other digits"
    return "units"


def load_trained(home: Path, run_id: str) -> tuple[Any, Any, Any]:
    """(model, tokenizer, chat format) of a kept run, loaded as inference loads it, in eval mode."""
    from trainkit_core.inference.loading import load_adapter_model
    from trainkit_core.models.trained.card import parse_card

    folder = home / "volumes" / "trainkit-models" / "trained" / run_id
    card = parse_card((folder / "trained_model.json").read_bytes(), where=str(folder))
    model, tokenizer, fmt = load_adapter_model(
        folder, card, home / "volumes" / "trainkit-hf-cache", device="cpu", quantize=False
    )
    model.eval()
    return model, tokenizer, fmt


def eval_records() -> list[dict[str, Any]]:
    text = (importlib.resources.files("trainkit_core") / "data/datasets/demo-tools/eval.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def read_calls(home: Path, run_id: str) -> list[dict[str, Any]]:
    """Each eval conversation's user question, wanted call, made calls and score, from the saved adapter."""
    import torch

    from trainkit_core.evals.scoring import first_call, score_calls
    from trainkit_core.models import tool_syntax

    model, tokenizer, fmt = load_trained(home, run_id)
    records = eval_records()
    found = []
    with torch.inference_mode():
        for first in range(0, len(records), 16):
            batch = records[first : first + 16]
            scores = score_calls(model, tokenizer, fmt, batch, stops=fmt.stop_ids(tokenizer), device="cpu")
            for record, score in zip(batch, scores, strict=True):
                turn = first_call(record)
                if turn is None:
                    continue
                call = turn[1][0]
                found.append(
                    {
                        "user": next(m["content"] for m in record["messages"] if m["role"] == "user"),
                        "wanted": (tool_syntax.function_of(call)["name"], tool_syntax.arguments_of(call)),
                        "made": tool_syntax.calls_made(score["tool_call_answer"], fmt.name),
                        "right": score["tool_call"] == 1.0,
                    }
                )
    return found


def previous_token_shares(home: Path, run_id: str, conversations: int = 20) -> list[tuple[int, int, float, float]]:
    """(layer, head, share on the token before, share on the token two before) from the user's digits, averaged
    over the first `conversations` eval prompts, the trained model loaded as inference loads it."""
    import torch

    model, tokenizer, _ = load_trained(home, run_id)
    model.get_base_model().set_attn_implementation("eager")  # the fused kernels return no weights
    sums: dict[tuple[int, int], list[float]] = {}
    for record in eval_records()[:conversations]:
        user_at = next(i for i, m in enumerate(record["messages"]) if m["role"] == "user")  # the question
        prompt = tokenizer.apply_chat_template(
            record["messages"][: user_at + 1], tools=record.get("tools"), tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        pieces = [tokenizer.decode([i]) for i in ids[0].tolist()]
        # The user's number: the prompt's last digits (the question ends the prompt; the tools hold none).
        last = max(i for i, p in enumerate(pieces) if p.strip().isdigit())
        digits = [
            i for i in range(last - 8, last + 1) if pieces[i].strip().isdigit() and pieces[i - 1].strip().isdigit()
        ]
        if not digits:
            continue
        with torch.inference_mode():
            attentions = model(input_ids=ids, output_attentions=True).attentions
        for layer, weights in enumerate(attentions):
            for head in range(weights.shape[1]):
                row = sums.setdefault((layer, head), [0.0, 0.0, 0.0])
                row[0] += sum(float(weights[0, head, i, i - 1]) for i in digits)
                row[1] += sum(float(weights[0, head, i, i - 2]) for i in digits)
                row[2] += len(digits)
    return [(layer, head, one / n, two / n) for (layer, head), (one, two, n) in sorted(sums.items())]


def print_shares(home: Path, run_id: str) -> None:
    for layer, head, one, two in previous_token_shares(home, run_id):
        print(f"layer {layer} head {head}: {one:.2f} on the token before, {two:.2f} on the one before it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON", help="A TrainConfig field.")
    parser.add_argument("--keep", type=Path, help="Keep the run's home in this folder (default: a temporary one).")
    parser.add_argument("--heads", action="store_true", help="Also print where the user's digits attend.")
    parser.add_argument("--reuse", action="store_true", help="Read the last run kept in --keep instead of training.")
    opts = parser.parse_args()
    config = {**TUTORIAL, **{k: json.loads(v) for k, _, v in (s.partition("=") for s in opts.set)}}
    home = (opts.keep or Path(tempfile.mkdtemp(prefix="trainkit-tools-"))) / "home"
    env = {**os.environ, "TRAINKIT_HOME": str(home), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; {config}")
    if opts.reuse:
        if opts.keep is None:
            raise SystemExit("--reuse reads a run kept with --keep DIR")
        runs = sorted((home / "volumes" / "trainkit-models" / "trained").glob("run-*"))
        if not runs:
            raise SystemExit(f"--reuse: no trained run in {home}")
        os.environ["HF_HOME"] = str(home / "volumes" / "trainkit-hf-cache")
        print_shares(home, runs[-1].name)
        return
    run = train_with(env, config)
    if run["status"] != "succeeded":
        raise SystemExit(f"the run {run['status']}: {run.get('error_message')}")
    os.environ["HF_HOME"] = str(home / "volumes" / "trainkit-hf-cache")
    calls = read_calls(home, run["id"])
    wrong = [c for c in calls if not c["right"]]
    counts: dict[str, int] = {}
    for c in wrong:
        c["kind"] = kind_of_mistake(c["wanted"], c["made"])
        counts[c["kind"]] = counts.get(c["kind"], 0) + 1
    metrics = run.get("metrics") or {}
    print(
        f"tool-call accuracy {len(calls) - len(wrong)}/{len(calls)} (the run's eval: "
        f"{metrics.get('eval_tool_call_accuracy')}); final loss {metrics.get('final_loss', float('nan')):.4f}; "
        f"training {metrics.get('train_runtime_s')} s"
    )
    for kind, count in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"  {kind}: {count}")
    for c in wrong:
        print(f"- {c['kind']}: {c['user']!r} wanted {c['wanted']}, made {c['made']}")
    if opts.heads:
        print_shares(home, run["id"])


if __name__ == "__main__":
    main()
