"""The same tiny fine-tune through `trainkit train` and through a bare trl script.

Both train the `tiny` preset's model with the tiny preset's own recipe (2-layer Gemma,
LoRA r=8 alpha=16 on the seven projections, embeddings and head trained in full, lr
1e-2 with 20 warm-up steps and a cosine decay, batch 16, one torch thread: what
`small_model_threads` gives a model this small) on the demo dataset for the same
number of steps on CPU, each in a fresh process. (Until issue 28 the bare side ran
another recipe, LoRA alone at a constant rate on two threads, and read 0.37x: not like
for like.) Prints each wall time (process start to exit)
and the ratio trainkit / trl, plus the trainer-only time of each, so the overhead of
trainkit (dataset sync, detached job, events, checkpoints, post-training checks and
eval) is visible. Timings vary ±30 % on a shared machine: compare ratios from one run.

    .venv/bin/python bench/bench_train_vs_trl.py [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

BARE_TRL = r"""
import json, sys, time
from pathlib import Path
import torch
from datasets import Dataset
from peft import LoraConfig
from trl import SFTConfig, SFTTrainer
from trainkit_core.chat_format import GEMMA3, render
from trainkit_core.tiny_model import build_model, build_tokenizer

steps, data_dir, out = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
rows = [json.loads(line) for line in (data_dir / "train.jsonl").read_text().splitlines() if line.strip()]
tokenizer = build_tokenizer([render(r["messages"], GEMMA3) for r in rows])
model = build_model(tokenizer)
torch.set_num_threads(1)
args = SFTConfig(
    output_dir=out, max_steps=steps, per_device_train_batch_size=16, learning_rate=1e-2,
    lr_scheduler_type="cosine", warmup_steps=20, logging_steps=10, save_strategy="no", use_cpu=True, bf16=False,
    gradient_checkpointing=False, report_to="none", assistant_only_loss=True, max_length=256,
    disable_tqdm=True, seed=42,
)
lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], modules_to_save=["embed_tokens", "lm_head"], task_type="CAUSAL_LM")
trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer, peft_config=lora)
result = trainer.train()
losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
print("BENCH", json.dumps({"train_runtime_s": result.metrics["train_runtime"], "first_loss": losses[0], "final_loss": losses[-1]}))
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])}… failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    opts = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        env = {
            **os.environ,
            "TRAINKIT_HOME": str(Path(tmp) / "home"),
            "TRAINKIT_DATASETS_DIR": str(REPO / "datasets"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        trl_wall, trl_out = timed(
            [python, "-c", BARE_TRL, str(opts.steps), str(REPO / "datasets" / "demo"), str(Path(tmp) / "trl")], env
        )
        trl = json.loads(trl_out.split("BENCH", 1)[1])
        tk_wall, tk_out = timed(
            [python, "-m", "trainkit_cli", "train", "--dataset", "demo", "--steps", str(opts.steps), "--json"], env
        )
        record = json.loads(tk_out)
        metrics = record.get("metrics", {})
    print(f"steps {opts.steps}, batch 16, tiny model, demo dataset, CPU")
    print(
        f"bare trl        wall {trl_wall:7.1f} s   trainer {trl['train_runtime_s']:6.1f} s   loss {trl['first_loss']:.2f} -> {trl['final_loss']:.2f}"
    )
    print(
        f"trainkit train  wall {tk_wall:7.1f} s   trainer {metrics.get('train_runtime_s', float('nan')):6.1f} s   "
        f"loss {metrics.get('first_loss', float('nan')):.2f} -> {metrics.get('final_loss', float('nan')):.2f}"
        + (f"   (post-training eval {metrics['eval_s']:.1f} s)" if "eval_s" in metrics else "")
    )
    print(
        f"ratio trainkit / trl: wall {tk_wall / trl_wall:.2f}x, trainer {metrics.get('train_runtime_s', 0) / trl['train_runtime_s']:.2f}x"
    )


if __name__ == "__main__":
    main()
