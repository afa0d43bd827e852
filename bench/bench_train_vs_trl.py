"""An SFT step through `trainkit train` against the same step in a bare trl script, same recipe, in lock-step.

Both sides train the `tiny` preset's model on the demo dataset with the recipe `trainkit
train` resolves for it (read from `TrainConfig`, not restated: 2-layer Gemma, LoRA r=8
alpha=16 on the seven projections, embeddings and head trained in full, lr 1e-2 with
warm-up and a cosine decay, batch 16, logging every step, one torch thread) and the
same loss semantics (the assistant's answer and its end of turn; trainkit masks while
tokenizing, trl with `assistant_only_loss`). Before the DPO and GRPO work the bare side ran another
recipe (LoRA alone at a constant rate on two threads, 0.37x: not like for like).

The two processes run at the same time and take turns step by step
(`bench/lockstep.py`), so the ratio is of matching steps under the same load; the
warm-up steps are left out. The figure: the median of the per-step ratios
trainkit / trl, wall and CPU time (goal <= 1.05x). What the ratio covers is what
trainkit adds to a step (its callbacks, events, progress and checkpoint bookkeeping),
not its start-up or post-training checks.

    .venv/bin/python bench/bench_train_vs_trl.py [--steps 200] [--warmup 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lockstep

REPO = Path(__file__).resolve().parent.parent

BARE_TRL = r"""
import json, sys
from pathlib import Path
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from trl import SFTConfig, SFTTrainer
from trainkit_core.models.chat_format import GEMMA3, render
from trainkit_core.models.tiny_model import build_model, build_tokenizer

data_dir, out, cfg = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
rows = [json.loads(line) for line in (data_dir / "train.jsonl").read_text().splitlines() if line.strip()]
tokenizer = build_tokenizer([render(r["messages"], GEMMA3) for r in rows])
model = build_model(tokenizer)
torch.set_num_threads(1)
args = SFTConfig(
    output_dir=out, max_steps=cfg["steps"], per_device_train_batch_size=cfg["batch_size"],
    learning_rate=cfg["learning_rate"], lr_scheduler_type=cfg["lr_scheduler"], warmup_steps=cfg["warmup_steps"],
    weight_decay=cfg["weight_decay"], seed=cfg["seed"], data_seed=cfg["seed"], max_length=cfg["max_seq_length"], logging_steps=1,
    save_strategy="no", use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none",
    assistant_only_loss=True, disable_tqdm=True,
)
lora = LoraConfig(r=cfg["lora_r"], lora_alpha=cfg["lora_alpha"], lora_dropout=cfg["lora_dropout"],
                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                  modules_to_save=cfg["modules_to_save"], task_type="CAUSAL_LM")
model = get_peft_model(model, lora)  # before the trainer, as trainkit does: the same LoRA draws from the same seed state
trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
result = trainer.train()
losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
print("BENCH", json.dumps({"first_loss": losses[0], "final_loss": losses[-1]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20, help="first steps left out of the figure")
    opts = parser.parse_args()
    from trainkit_core.training.config import TrainConfig

    recipe = TrainConfig.parse(dataset="demo", steps=opts.steps).resolve().model_dump(mode="json")
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        base = lockstep.offline_environment(Path(tmp) / "home", REPO / "datasets")
        times, metrics, bare = lockstep.compare(
            [sys.executable, "-m", "trainkit_cli", "train", "--dataset", "demo", "--steps", str(opts.steps),
             "--save-every", str(opts.steps + 1), "--json"],
            [sys.executable, "-c", BARE_TRL, str(REPO / "datasets" / "demo"), str(Path(tmp) / "trl"), json.dumps(recipe)],
            base, Path(tmp) / "clock", REPO,
        )  # fmt: skip
    lockstep.report(
        f"sft: {opts.steps} steps ({opts.warmup} warm-up left out), batch {recipe['batch_size']}, tiny model, "
        "demo dataset, CPU, one torch thread",
        times, opts.warmup, metrics, bare,
    )  # fmt: skip


if __name__ == "__main__":
    main()
