"""One vision training step: trainkit's image path against bare trl, same processor and model, as a ratio.

Both sides train the Gemma 3 twin (`tiny-gemma3mm`, LoRA r=8 on the language model's
projections, the vision tower and projector in full) on the shapes dataset
(`scripts/make_shapes_dataset.py`), batch 8, on CPU, each in a fresh process:

- trainkit: `load_hf` + `build_trainer` with `VisionCollator` (the run's own code);
- bare trl: `SFTTrainer` with a ten-line collator on the same processor (the whole
  conversation's tokens trained, which costs the same forward and backward).

Prints the median seconds per step of each (after one warm-up step) and the ratio
trainkit / trl (goal: <= 1.05). Timings vary on a shared machine: compare the ratio of
one run.

    .venv/bin/python bench/bench_vision_step.py [--steps 6]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

COMMON = r"""
import json, statistics, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from transformers import TrainerCallback
from trainkit_core.twins import ensure_twin_base
from trainkit_core.processors import load_processor
from trainkit_core.datasets.images import with_image_paths
steps, data, work = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
folder = ensure_twin_base("trainkit/tiny-gemma3mm", work / "hf")
processor = load_processor(folder)
records = [json.loads(l) for l in (data / "train.jsonl").read_text().splitlines() if l.strip()]
records = [with_image_paths(r, lambda rel: str(data / rel)) for r in records]

class Clock(TrainerCallback):
    def __init__(self): self.times, self.start = [], None
    def on_step_begin(self, *a, **k): self.start = time.perf_counter()
    def on_step_end(self, *a, **k): self.times.append(time.perf_counter() - self.start)
clock = Clock()
"""

TRAINKIT = (
    COMMON
    + r"""
from trainkit_core.chat_format import GEMMA3
from trainkit_core.training.backends import build_trainer, load_hf
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.vision import as_rows, with_vision_modules
from trainkit_core.vision_collator import VisionCollator
config = TrainConfig.parse(dataset="shapes", model_size="tiny-gemma3mm", steps=steps, batch_size=8).resolve()
config = with_vision_modules(config, str(folder)).model_copy(update={"save_every": 10**6})
model = load_hf(str(folder), config)
trainer = build_trainer("hf", model, processor.tokenizer, as_rows(records), config, work / "out", [clock],
                        data_collator=VisionCollator(processor, GEMMA3, max_length=config.max_seq_length))
trainer.train()
print("BENCH", json.dumps({"step_s": statistics.median(clock.times[1:])}))
"""
)

BARE_TRL = (
    COMMON
    + r"""
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer
from trainkit_core.datasets.images import load_image
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)

def collate(rows):
    texts, images = [], []
    for row in rows:
        r = json.loads(row["record"])
        user, answer = r["messages"][0]["content"], r["messages"][1]["content"]
        texts.append("<bos><start_of_turn>user\n" + user[0]["text"] + "\n<start_of_image><end_of_turn>\n<start_of_turn>model\n" + answer + "<end_of_turn>\n")
        images.append([load_image(user[1]["image_url"]["url"])])
    batch = dict(processor(text=texts, images=images, return_tensors="pt", padding=True))
    batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    return batch

args = SFTConfig(output_dir=str(work / "out"), max_steps=steps, per_device_train_batch_size=8, learning_rate=1e-2,
                 lr_scheduler_type="constant", save_strategy="no", use_cpu=True, bf16=False, gradient_checkpointing=False,
                 report_to="none", disable_tqdm=True, remove_unused_columns=False, logging_steps=1,
                 dataset_kwargs={"skip_prepare_dataset": True})
lora = LoraConfig(r=8, lora_alpha=16, target_modules=r"^(?!.*(vision|multi_modal)).*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)$",
                  modules_to_save=["vision_tower", "multi_modal_projector"], task_type="CAUSAL_LM")
rows = [{"record": json.dumps(r)} for r in records]
trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=processor.tokenizer,
                     peft_config=lora, data_collator=collate, callbacks=[clock])
trainer.train()
print("BENCH", json.dumps({"step_s": statistics.median(clock.times[1:])}))
"""
)


def run(script: str, steps: int, data: Path, work: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", script, str(steps), str(data), str(work)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("BENCH "))
    return float(json.loads(line.removeprefix("BENCH "))["step_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "scripts"))
    import make_shapes_dataset

    with tempfile.TemporaryDirectory() as tmp:
        data = make_shapes_dataset.write(Path(tmp) / "shapes", train_per_class=4, eval_per_class=1)
        trainkit = run(TRAINKIT, args.steps, data, Path(tmp) / "a")
        trl = run(BARE_TRL, args.steps, data, Path(tmp) / "b")
    print(f"trainkit: {trainkit:.3f} s/step   bare trl: {trl:.3f} s/step   ratio: {trainkit / trl:.3f} (goal <= 1.05)")


if __name__ == "__main__":
    main()
