"""Several processes by hand: tokens/s of a tiny SFT run on 1 and 2 processes (gloo), trainkit against bare trl.

trainkit's runs go through the local provider (`trainkit train --processes N` as a user runs
it). The baseline is a bare trl script with the same model (the tiny base trainkit builds), the
same recipe (read from the resolved `TrainConfig`, not restated) and the same global batch,
launched by torchrun with N processes: what accelerate does under the Trainer, with no
trainkit code around it. tokens/s is each trainer's own count over its training phase (for
trainkit the last progress event's `tokens_per_s`; for the baseline `num_input_tokens_seen`
over `train_runtime`; both count the tokens that are not padding, of every rank), so neither
side's start-up is counted. It prints the four figures,
2/1 for each side and trainkit/bare at each size, and trainkit's 2-process run with
``--strategy fsdp`` against its ddp run, all from one run on one machine.
Timings belong in docs/developer/records, never in tests.

    .venv/bin/python bench/distributed.py [--steps 40] [--batch 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

#: The baseline: trl's SFTTrainer on the tiny base, run by torchrun (one copy per rank).
BARE_DDP = r"""
import json, os, sys
from pathlib import Path
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer
from trainkit_core.models.chat_format import GEMMA3
from trainkit_core.models.tiny_model import ensure_tiny_base

data_dir, out, cfg, hf_home = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), Path(sys.argv[4])
world = int(os.environ.get("WORLD_SIZE", "1"))
rows = [json.loads(line) for line in (data_dir / "train.jsonl").read_text().splitlines() if line.strip()]
base = ensure_tiny_base(hf_home)
tokenizer = AutoTokenizer.from_pretrained(base)
tokenizer.chat_template = GEMMA3.chat_template
model = AutoModelForCausalLM.from_pretrained(base)
torch.set_num_threads(1)
args = SFTConfig(
    output_dir=out, max_steps=cfg["steps"], per_device_train_batch_size=cfg["batch_size"] // world,
    learning_rate=cfg["learning_rate"], lr_scheduler_type=cfg["lr_scheduler"], warmup_steps=cfg["warmup_steps"],
    weight_decay=cfg["weight_decay"], seed=cfg["seed"], data_seed=cfg["seed"], max_length=cfg["max_seq_length"],
    logging_steps=1, save_strategy="no", use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none",
    assistant_only_loss=True, disable_tqdm=True, include_num_input_tokens_seen="non_padding",
    ddp_backend="gloo" if world > 1 else None, ddp_find_unused_parameters=False,
)
lora = LoraConfig(r=cfg["lora_r"], lora_alpha=cfg["lora_alpha"], lora_dropout=cfg["lora_dropout"],
                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                  modules_to_save=cfg["modules_to_save"], task_type="CAUSAL_LM")
model = get_peft_model(model, lora)
trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
result = trainer.train()
if int(os.environ.get("RANK", "0")) == 0:
    print("BENCH", json.dumps({"tokens_per_s": trainer.state.num_input_tokens_seen / result.metrics["train_runtime"]}))
"""


def bare(processes: int, steps: int, batch: int, work: Path) -> float:
    """tokens/s of the bare trl script on `processes` ranks (torchrun), the recipe trainkit resolves."""
    from trainkit_core.training.config import TrainConfig

    recipe = TrainConfig.parse(dataset="demo", steps=steps, batch_size=batch).resolve().model_dump(mode="json")
    script = work / "bare_ddp.py"
    script.write_text(BARE_DDP)
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}", str(script),
        str(REPO / "datasets" / "demo"), str(work / f"bare-{processes}"), json.dumps(recipe), str(work / "hf"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"bare trl on {processes} process(es) failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return float(json.loads(lines[-1][len("BENCH ") :])["tokens_per_s"])


def one(local: Any, processes: int, steps: int, batch: int, strategy: str = "auto") -> float:
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.training.submit import start_run

    recipe = {"dataset": "demo", "steps": steps, "batch_size": batch, "processes": processes, "strategy": strategy}
    run = start_run(local, recipe)
    run = run.wait(timeout=3600)
    if run.status != "succeeded":
        raise SystemExit(f"{processes} process(es): run {run.id} {run.status}: {run.error_message}")
    events = RunStore.for_provider(local).events(run.id).read()
    rates = [e["tokens_per_s"] for e in events if e.get("type") == "progress" and e.get("tokens_per_s")]
    if not rates:
        raise SystemExit(f"run {run.id} reported no tokens_per_s")
    return float(rates[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    from trainkit_core import get_provider
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[name] = "1"
    work = Path(tempfile.mkdtemp(prefix="bench-distributed-"))
    settings = Settings(
        provider=ProviderSettings(home=work / "home"), datasets=DatasetSettings(datasets_dir=work / "datasets")
    )
    local = get_provider("local", settings)
    (work / "datasets").mkdir(parents=True, exist_ok=True)
    (work / "datasets" / "demo").symlink_to(REPO / "datasets" / "demo")
    ours = {n: one(local, n, args.steps, args.batch) for n in (1, 2)}
    sharded = one(local, 2, args.steps, args.batch, strategy="fsdp")
    theirs = {n: bare(n, args.steps, args.batch, work) for n in (1, 2)}
    print(f"tiny SFT, {args.steps} steps, global batch {args.batch}, CPU (gloo), tokens/s")
    print(f"{'':14}{'trainkit':>12}{'bare trl':>12}{'trainkit/bare':>15}")
    for n in (1, 2):
        print(f"{n} process(es){ours[n]:12.1f}{theirs[n]:12.1f}{ours[n] / theirs[n]:15.2f}")
    print(f"{'ratio 2/1':14}{ours[2] / ours[1]:12.2f}{theirs[2] / theirs[1]:12.2f}")
    print(f"2 processes, fsdp: {sharded:.1f} tokens/s, fsdp/ddp {sharded / ours[2]:.2f} (trainkit)")


if __name__ == "__main__":
    main()
