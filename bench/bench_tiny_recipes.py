"""Recipes for the `tiny` preset on the demo task: exact match, end-of-turn rate, training time.

The task is ``datasets/demo`` (opposites, word by word, 60 words; the eval split holds
combinations train never shows). Each recipe trains in a fresh process on one torch
thread through trainkit's own training code (`load_hf`, `build_trainer`, the
assistant-only mask), with no checkpoints, then scores the eval split greedily
(`trainkit_core.evals.scoring.evaluate`): exact match and the share of answers that
stopped at ``<end_of_turn>``.

Training time is printed twice: wall seconds, and the process's CPU seconds. On one
thread the CPU seconds are what the wall time would be on a quiet machine, so they
stay meaningful on a machine shared with other work (the load average is printed
before and after). Timings are never asserted anywhere; compare recipes of one run.

    .venv/bin/python bench/bench_tiny_recipes.py [--only NAME ...] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "datasets" / "demo"

#: The tiny model as it was before (trainkit 0.x, BUILD_VERSION 1): 512 tokens, tied head, 1 KV head.
V1_SHAPE = {"vocab_size": 512, "tie_word_embeddings": True, "num_key_value_heads": 1}
V1_RECIPE = {
    "steps": 300,
    "lr_scheduler": "constant",
    "warmup_steps": 0,
    "learning_rate": 1e-2,
    "modules_to_save": [],
}

#: name -> (what it shows, model shape overrides, TrainConfig overrides). "default" is the preset as it is.
RECIPES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "v1": ("the previous tiny: its model, LoRA only, 300 steps, constant lr", V1_SHAPE, V1_RECIPE),
    "lora-only": (
        "today's model, LoRA only (embeddings and head frozen), default schedule",
        {},
        {"modules_to_save": []},
    ),
    "constant-lr": (
        "default, but a constant learning rate (no warm-up, no decay)",
        {},
        {"lr_scheduler": "constant", "warmup_steps": 0},
    ),
    "half": ("default, half the steps", {}, {"half": True}),
    "1200-examples": ("default, on the first 1200 train examples only (5+ epochs)", {}, {"train_examples": 1200}),
    "default": ("the tiny preset's defaults", {}, {}),
}


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one recipe and score it; runs in a fresh process."""
    import torch

    torch.set_num_threads(1)
    from trainkit_core.evals.scoring import evaluate
    from trainkit_core.models import tiny_model
    from trainkit_core.models.chat_format import GEMMA3, encode_for_training, render
    from trainkit_core.training.backends import build_trainer, load_hf
    from trainkit_core.training.config import TrainConfig

    train = [json.loads(line) for line in (DATA / "train.jsonl").read_text().splitlines() if line.strip()]
    held_out = [json.loads(line) for line in (DATA / "eval.jsonl").read_text().splitlines() if line.strip()]
    shape = dict(spec["shape"])
    vocab = int(shape.pop("vocab_size", tiny_model.VOCAB_SIZE))
    overrides = dict(spec["config"])
    half = bool(overrides.pop("half", False))
    train = train[: int(overrides.pop("train_examples", len(train)))]
    config = TrainConfig(dataset="demo", model_size="tiny", save_every=1_000_000, **overrides).resolve()
    if half:
        config = config.model_copy(update={"steps": (config.steps or 2) // 2})
    with tempfile.TemporaryDirectory(prefix="bench-tiny-") as tmp:
        tokenizer = tiny_model.build_tokenizer([render(e["messages"], GEMMA3) for e in train], vocab_size=vocab)
        base = tiny_model.build_model(tokenizer, vocab_size=vocab, **shape)
        base.save_pretrained(Path(tmp) / "base")
        model = load_hf(str(Path(tmp) / "base"), config)
        rows = [encode_for_training(tokenizer, e["messages"], GEMMA3, max_length=config.max_seq_length) for e in train]
        trainer = build_trainer("hf", model, tokenizer, rows, config, Path(tmp) / "out", [])
        cpu, wall = time.process_time(), time.perf_counter()
        trainer.train()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        model.eval()
        result = evaluate(model, tokenizer, GEMMA3, held_out, device="cpu")
    stopped = sum(bool(r["tuned"]["stopped"]) for r in result["rows"]) / len(result["rows"])
    steps = trainer.state.global_step
    return {
        "steps": steps,
        "epochs": round(float(trainer.state.epoch or 0), 2),
        "train_wall_s": round(wall, 1),
        "train_cpu_s": round(cpu, 1),
        "steps_per_cpu_s": round(steps / cpu, 1) if cpu else None,
        "first_loss": round(losses[0], 3),
        "final_loss": round(losses[-1], 4),
        "exact_match": result["tuned"]["exact_match"],
        "end_of_turn_rate": round(stopped, 3),
        "base_exact_match": result["base"]["exact_match"],
        "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "wrong": [(r["reference"], r["tuned"]["answer"]) for r in result["rows"] if not r["tuned"]["exact_match"]][:3],
    }


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} / {five:.1f}"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(RECIPES), help="Recipes to run (default: all).")
    parser.add_argument(
        "--jobs", type=int, default=1, help="Recipes trained at once (each on one thread; CPU seconds stay comparable)."
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print("BENCH", json.dumps(child(json.loads(opts.child))))
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; load average (1 / 5 min) {load()}")
    print(
        f"task: {DATA.relative_to(REPO)} ({sum(1 for _ in (DATA / 'train.jsonl').open())} train, "
        f"{sum(1 for _ in (DATA / 'eval.jsonl').open())} eval examples)"
    )
    print()
    print(
        "| recipe | what | steps (epochs) | exact match | end of turn | train CPU s | train wall s | steps / CPU s | loss |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    names = opts.only or list(RECIPES)

    def run(name: str) -> dict[str, Any]:
        _, shape, config = RECIPES[name]
        spec = json.dumps({"shape": shape, "config": config})
        done = subprocess.run(
            [sys.executable, __file__, "--child", spec], env=env, cwd=REPO, capture_output=True, text=True, check=False
        )
        if done.returncode != 0 or "BENCH" not in done.stdout:
            sys.exit(f"{name} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        return dict(json.loads(done.stdout.split("BENCH", 1)[1]))

    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        results = dict(zip(names, pool.map(run, names), strict=True))
    for name, r in results.items():
        print(
            f"| {name} | {RECIPES[name][0]} | {r['steps']} ({r['epochs']:g}) "
            f"| {r['exact_match']:.2f} (base {r['base_exact_match']:.2f}) | {r['end_of_turn_rate']:.2f} "
            f"| {r['train_cpu_s']:.0f} | {r['train_wall_s']:.0f} | {r['steps_per_cpu_s']} "
            f"| {r['first_loss']:.2f} → {r['final_loss']:.3f} |"
        )
    for name, r in results.items():
        print(f"{name}: trainable parameters {r['trainable_params']}; wrong answers, e.g. {r['wrong']}")
    print()
    print(f"load average after (1 / 5 min): {load()}")


if __name__ == "__main__":
    main()
