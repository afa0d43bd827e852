"""DPO and GRPO steps through `trainkit train --method` against bare trl, same model, data and recipe, in lock-step.

For each method, on CPU: `trainkit train --method M` (the tiny preset with the method's
tiny defaults, from a fresh adapter) and a bare trl script that builds the same tiny
model and tokenizer (from the same texts as the job builds it), the same LoRA, the same
rows (prompts rendered in the Gemma 3 format, answers closed by the end of turn) and
the same trl config, every value read from the `TrainConfig` trainkit resolves (DPO: lr
5e-3 constant, batch 8, beta 0.1, loss sigmoid + sft; GRPO: lr 1e-3, 4 generations of
at most 8 tokens, the temperature), on one torch thread. GRPO is rewarded by
`length_penalty` on both sides: from a fresh adapter on the random base an exact match
is never reached, every reward would be 0 and nothing would be learnt (trainkit's
adapter gate rightly fails such a run).

The two processes run at the same time and take turns step by step
(`bench/lockstep.py`); the figure is the median of the per-step ratios trainkit / trl,
wall and CPU time, warm-up steps left out (goal <= 1.05x: what trainkit adds to a step,
its callbacks, events, rollouts and guarded grader calls; neither side saves a
checkpoint during the steps timed).

    .venv/bin/python bench/bench_methods_vs_trl.py [--steps 60] [--warmup 5] [--only dpo]
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
PAIRS, PROMPTS = 400, 200

BARE = r"""
import json, sys
from pathlib import Path
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from trainkit_core.models.chat_format import GEMMA3, render, render_prompt
from trainkit_core.models.tiny_model import build_model, build_tokenizer

method, data_dir, out, cfg = sys.argv[1], Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
steps = cfg["steps"]
lines = [json.loads(l) for l in (data_dir / "train.jsonl").read_text().splitlines() if l.strip()]
close = GEMMA3.end_of_turn + "\n"
if method == "dpo":
    rows = [{"prompt": render_prompt(l["input"]["messages"], GEMMA3),
             "chosen": l["preferred_output"][0]["content"] + close,
             "rejected": l["non_preferred_output"][0]["content"] + close} for l in lines]
    texts = [render([*l["input"]["messages"], side[0]], GEMMA3) for l in lines
             for side in (l["preferred_output"], l["non_preferred_output"])]
else:
    rows = [{"prompt": render_prompt(l["messages"], GEMMA3), "reference": l["reference"]} for l in lines]
    texts = [t for l in lines for t in (render(l["messages"], GEMMA3), l["reference"])]
tokenizer = build_tokenizer(texts)
if tokenizer.pad_token is None:
    tokenizer.pad_token = tokenizer.eos_token
torch.set_num_threads(1)
lora = LoraConfig(r=cfg["lora_r"], lora_alpha=cfg["lora_alpha"], lora_dropout=cfg["lora_dropout"],
                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                  modules_to_save=cfg["modules_to_save"], task_type="CAUSAL_LM")
model = get_peft_model(build_model(tokenizer), lora)
common = dict(output_dir=out, max_steps=steps, per_device_train_batch_size=cfg["batch_size"], learning_rate=cfg["learning_rate"],
              lr_scheduler_type=cfg["lr_scheduler"], warmup_steps=cfg["warmup_steps"], logging_steps=1, save_strategy="no",
              use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none", disable_tqdm=True,
              seed=cfg["seed"], data_seed=cfg["seed"], remove_unused_columns=False)
if method == "dpo":
    from trl import DPOConfig, DPOTrainer
    args = DPOConfig(**common, beta=cfg["dpo_beta"], loss_type=cfg["dpo_loss_type"], max_length=cfg["max_seq_length"])
    trainer = DPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
else:
    from trl import GRPOConfig, GRPOTrainer
    def length_penalty(prompts, completions, **_):
        return [-min(1.0, len(c) / 200) for c in completions]
    tokenizer.padding_side = "left"
    model.generation_config.eos_token_id = [tokenizer.convert_tokens_to_ids(GEMMA3.end_of_turn), tokenizer.eos_token_id]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    args = GRPOConfig(**common, num_generations=cfg["num_generations"], max_completion_length=cfg["max_completion_length"],
                      beta=cfg["kl_coef"], temperature=cfg["temperature"])
    trainer = GRPOTrainer(model=model, reward_funcs=[length_penalty], args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
result = trainer.train()
losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
print("BENCH", json.dumps({"first_loss": losses[0], "final_loss": losses[-1], "rewards": rewards}))
"""


def _datasets(root: Path) -> None:
    """style-pref (preference) and style-prompts (prompt) from the demo's opposites."""
    pairs = []
    for line in (REPO / "datasets" / "demo" / "train.jsonl").read_text().splitlines():
        messages = json.loads(line)["messages"]
        pairs.append((messages[0]["content"], messages[1]["content"]))
    for name, fmt, records in (
        (
            "style-pref",
            "preference",
            [
                {
                    "input": {"messages": [{"role": "user", "content": p}]},
                    "preferred_output": [{"role": "assistant", "content": a + "."}],
                    "non_preferred_output": [{"role": "assistant", "content": a}],
                }
                for p, a in pairs[:PAIRS]
            ],
        ),
        (
            "style-prompts",
            "prompt",
            [{"messages": [{"role": "user", "content": p}], "reference": a} for p, a in pairs[:PROMPTS]],
        ),
    ):
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "dataset.toml").write_text(f'name = "{name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\n')
        (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _mean_rewards(home: Path, run_id: str) -> list[float]:
    """The mean reward of each step of a trainkit run, from its progress events."""
    from trainkit_core import get_provider
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    provider = get_provider("local", Settings(provider=ProviderSettings(home=home), datasets=DatasetSettings()))
    events = RunStore.for_provider(provider).get(run_id).events.read()
    return [e["reward_mean"] for e in events if e["type"] == "progress" and "reward_mean" in e]


def _fmt(values: list[float]) -> str:
    shown = [f"{v:.3f}" for v in values[:3]] + (["...", f"{values[-1]:.3f}"] if len(values) > 3 else [])
    return " ".join(shown) + f" (mean {sum(values) / max(1, len(values)):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5, help="first steps left out of the figure")
    parser.add_argument("--only", choices=["dpo", "grpo"], default=None)
    opts = parser.parse_args()
    from trainkit_core.training.config import TrainConfig

    with tempfile.TemporaryDirectory(prefix="bench-methods-") as tmp:
        _datasets(Path(tmp) / "datasets")
        base = lockstep.offline_environment(Path(tmp) / "home", Path(tmp) / "datasets")
        for method, dataset, extra in (
            ("dpo", "style-pref", []),
            ("grpo", "style-prompts", ["--reward", "length_penalty"]),
        ):
            if opts.only and opts.only != method:
                continue
            recipe = TrainConfig.parse(dataset=dataset, method=method, steps=opts.steps).resolve()
            times, metrics, bare = lockstep.compare(
                [sys.executable, "-m", "trainkit_cli", "train", "--dataset", dataset, "--method", method,
                 "--steps", str(opts.steps), "--save-every", str(opts.steps + 1), "--json", *extra],
                [sys.executable, "-c", BARE, method, str(Path(tmp) / "datasets" / dataset),
                 str(Path(tmp) / f"bare-{method}"), json.dumps(recipe.model_dump(mode="json"))],
                base, Path(tmp) / f"clock-{method}", REPO,
            )  # fmt: skip
            lockstep.report(
                f"{method}: {opts.steps} steps ({opts.warmup} warm-up left out), batch {recipe.batch_size}, "
                "tiny model, CPU, one torch thread",
                times, opts.warmup, metrics, bare,
            )  # fmt: skip
            if method == "grpo":  # its loss is 0 by construction: the rewards of the sampled groups tell instead
                ours = _mean_rewards(Path(tmp) / "home", metrics["run_id"])
                print(
                    f"  mean reward per step (same samples when the same work): trainkit {_fmt(ours)}, trl {_fmt(bare['rewards'])}"
                )


if __name__ == "__main__":
    main()
