"""A vision training step through `trainkit train` against bare trl, same twin, processor, data and recipe, in lock-step.

Both sides train the Gemma 3 twin (`tiny-gemma3mm`) on the shapes dataset
(`scripts/make_shapes_dataset.py`) on CPU, with the recipe `trainkit train` resolves for
it, read from `TrainConfig` (LoRA on the language model's projections; embeddings, head,
vision tower and projector trained in full, the tower and projector at their own
learning rate; batch 4; warm-up and cosine decay; one torch thread), and the same loss
semantics: only the assistant's answer and its end of turn count (image tokens, prompt
and padding masked). trainkit's side is the real run (its `VisionCollator`, callbacks
and events); the bare side is what a trl user writes: the processor on rendered
conversations, a collator masking all before the last model turn, AdamW with two
parameter groups, `SFTTrainer`.

The two processes run at the same time and take turns step by step
(`bench/lockstep.py`); the figure is the median of the per-step ratios trainkit / trl,
wall and CPU time, warm-up steps left out (goal <= 1.05x).

    .venv/bin/python bench/bench_vision_step.py [--steps 40] [--warmup 5]
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
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor
from trl import SFTConfig, SFTTrainer
from trainkit_core.models.twins import ensure_twin_base

data, work, cfg = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
folder = ensure_twin_base("trainkit/tiny-gemma3mm", work / "hf")
processor = AutoProcessor.from_pretrained(folder)
tokenizer = processor.tokenizer
model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32)
torch.set_num_threads(1)
turn_start = tokenizer.convert_tokens_to_ids("<start_of_turn>")
header = len(tokenizer("<start_of_turn>model\n", add_special_tokens=False)["input_ids"])

def collate(rows):
    texts, images = [], []
    for row in rows:
        user, answer = (m["content"] for m in json.loads(row["record"])["messages"])
        question = next(p["text"] for p in user if p["type"] == "text")
        picture = next(p["image_url"]["url"] for p in user if p["type"] == "image_url")
        texts.append(f"<bos><start_of_turn>user\n{question}\n<start_of_image><end_of_turn>\n"
                     f"<start_of_turn>model\n{answer}<end_of_turn>\n")
        images.append([Image.open(data / picture).convert("RGB")])
    batch = dict(processor(text=texts, images=images, return_tensors="pt", padding=True))
    labels = batch["input_ids"].clone()
    for row, ids in enumerate(labels.tolist()):
        answer_start = len(ids) - 1 - ids[::-1].index(turn_start) + header
        labels[row, :answer_start] = -100
    labels[batch["attention_mask"] == 0] = -100
    batch["labels"] = labels
    return batch

lora = LoraConfig(r=cfg["lora_r"], lora_alpha=cfg["lora_alpha"], lora_dropout=cfg["lora_dropout"],
                  target_modules=r"^(?!.*(vision|multi_modal)).*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)$",
                  modules_to_save=cfg["modules_to_save"], task_type="CAUSAL_LM")
model = get_peft_model(model, lora)
vision = set(cfg["vision_modules"])
groups = {"vision": [], "rest": []}
for name, parameter in model.named_parameters():
    if parameter.requires_grad:
        groups["vision" if vision & set(name.split(".")) else "rest"].append(parameter)
optimizer = torch.optim.AdamW([{"params": groups["rest"], "lr": cfg["learning_rate"]},
                               {"params": groups["vision"], "lr": cfg["vision_learning_rate"]}],
                              lr=cfg["learning_rate"], weight_decay=cfg["weight_decay"])
args = SFTConfig(output_dir=str(work / "out"), max_steps=cfg["steps"], per_device_train_batch_size=cfg["batch_size"],
                 learning_rate=cfg["learning_rate"], lr_scheduler_type=cfg["lr_scheduler"],
                 warmup_steps=cfg["warmup_steps"], weight_decay=cfg["weight_decay"], seed=cfg["seed"],
                 data_seed=cfg["seed"], max_length=cfg["max_seq_length"], logging_steps=1, save_strategy="no",
                 use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none", disable_tqdm=True,
                 remove_unused_columns=False, dataset_kwargs={"skip_prepare_dataset": True})
records = [json.loads(l) for l in (data / "train.jsonl").read_text().splitlines() if l.strip()]
trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list([{"record": json.dumps(r)} for r in records]),
                     processing_class=tokenizer, data_collator=collate, optimizers=(optimizer, None))
trainer.train()
losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
print("BENCH", json.dumps({"first_loss": losses[0], "final_loss": losses[-1]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5, help="first steps left out of the figure")
    opts = parser.parse_args()
    sys.path.insert(0, str(REPO / "scripts"))
    import make_shapes_dataset

    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.vision import vision_modules

    config = TrainConfig.parse(dataset="shapes", model_size="tiny-gemma3mm", steps=opts.steps).resolve()
    recipe = config.model_dump(mode="json")
    recipe["vision_modules"] = vision_modules("gemma3")
    recipe["modules_to_save"] = [*recipe["modules_to_save"], *recipe["vision_modules"]]  # as `with_vision_modules`
    with tempfile.TemporaryDirectory(prefix="bench-vision-") as tmp:
        data = make_shapes_dataset.write(Path(tmp) / "datasets" / "shapes", train_per_class=4, eval_per_class=1)
        base = lockstep.offline_environment(Path(tmp) / "home", Path(tmp) / "datasets")
        times, metrics, bare = lockstep.compare(
            [sys.executable, "-m", "trainkit_cli", "train", "--dataset", "shapes", "--model-size", "tiny-gemma3mm",
             "--steps", str(opts.steps), "--save-every", str(opts.steps + 1), "--json"],
            [sys.executable, "-c", BARE_TRL, str(data), str(Path(tmp) / "trl"), json.dumps(recipe)],
            base, Path(tmp) / "clock", REPO,
        )  # fmt: skip
    lockstep.report(
        f"vision sft: {opts.steps} steps ({opts.warmup} warm-up left out), batch {config.batch_size}, "
        "tiny-gemma3mm, shapes pictures, CPU, one torch thread",
        times, opts.warmup, metrics, bare,
    )  # fmt: skip


if __name__ == "__main__":
    main()
