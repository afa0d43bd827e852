"""The options that make a `TrainConfig`, shared by `trainkit train` and `trainkit sweep`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


def config_options(func: Any) -> Any:
    """Add the options that make a `TrainConfig` to a command."""
    options = [
        click.option("--dataset", required=True, help="Dataset name (a folder of the datasets dir)."),
        click.option(
            "--model-size", default=None, help="Preset: tiny (CPU, built locally), 4b, 12b or 31b. Default tiny."
        ),
        click.option(
            "--base-model",
            default=None,
            help="Instead of a preset: a Hugging Face id, a model folder (local provider), or hf-cache:FOLDER.",
        ),
        click.option("--chat-format", default=None, type=click.Choice(["gemma3", "gemma4"]), help="Override."),
        click.option(
            "--steps",
            "--train-steps",
            "steps",
            default=None,
            type=int,
            help="Optimizer steps (default: the preset's). --train-steps is seed 000's name for it.",
        ),
        click.option("--epochs", default=None, type=float, help="Epochs, instead of --steps."),
        click.option("--lr", "learning_rate", default=None, type=float, help="Learning rate."),
        click.option(
            "--lr-scheduler",
            default=None,
            type=click.Choice(["constant", "linear", "cosine"]),
            help="Learning-rate schedule (default: the preset's).",
        ),
        click.option("--warmup-steps", default=None, type=int, help="Warm-up steps (default: the preset's)."),
        click.option("--lora-r", default=None, type=int, help="LoRA rank."),
        click.option("--lora-alpha", default=None, type=int, help="LoRA alpha."),
        click.option("--batch-size", default=None, type=int, help="Per-device batch size."),
        click.option("--grad-accum", default=None, type=int, help="Gradient accumulation steps."),
        click.option("--max-seq-length", default=None, type=int, help="Longest example, in tokens."),
        click.option("--save-every", default=None, type=int, help="Checkpoint every N steps (default 50)."),
        click.option("--seed", default=None, type=int, help="Random seed (default 42)."),
        click.option("--backend", default=None, type=click.Choice(["auto", "hf", "unsloth"]), help="Force a backend."),
        click.option(
            "--4bit/--no-4bit",
            "load_in_4bit",
            default=None,
            help="Load the base in 4-bit on a GPU (QLoRA; the GPU presets' default), or in bf16.",
        ),
        click.option(
            "--finetune-vision-layers/--no-finetune-vision-layers",
            default=None,
            help="On an image dataset, also train the vision layers (Unsloth's switch; default: the preset's).",
        ),
        click.option(
            "--finetune-audio-layers/--no-finetune-audio-layers",
            default=None,
            help="On an audio dataset (e2b, e4b), also train the audio tower in full (hf backend; default: the "
            "preset's).",
        ),
        click.option(
            "--packing/--no-packing",
            default=None,
            help="SFT: pack several examples into each row of --max-seq-length tokens, padding-free (no attention "
            "across examples); --batch-size then counts packed rows. Text only, hf backend.",
        ),
        click.option(
            "--keep-thinking/--drop-thinking",
            default=None,
            help="Train on the assistant's thinking where the data has it (Gemma 4; default), or drop it so the "
            "model learns to answer directly.",
        ),
        click.option(
            "--processes",
            default=None,
            type=int,
            help="Train the run on N CPU processes (gloo, local provider); --batch-size stays the global "
            "batch of a step and must divide by N.",
        ),
        click.option(
            "--strategy",
            default=None,
            type=click.Choice(["auto", "ddp", "fsdp"]),
            help="How a run on several ranks splits the work: ddp (a model copy per rank), fsdp (sharded), or auto "
            "(ddp when the weights fit one GPU with room to train, else fsdp).",
        ),
        click.option("--gpu", default=None, help="GPU for this run (default TRAINKIT_GPU, else the preset's)."),
        click.option(
            "--gpus",
            default=None,
            type=int,
            help="GPUs per node for the run (default 1; --gpu KIND:N says the same). A provider that cannot place "
            "them refuses before anything starts.",
        ),
        click.option(
            "--nodes", default=None, type=int, help="Machines for the run, where the provider can (default 1)."
        ),
        click.option(
            "--keep-checkpoints",
            default=None,
            type=int,
            help="Keep the last N checkpoints (and the best by eval loss with an eval split); default all.",
        ),
        click.option(
            "--method",
            default=None,
            type=str,
            help="sft (chat data, the default), dpo (preference pairs), grpo (prompts scored by graders), "
            "or the name of a method plugin (entry point group trainkit.methods).",
        ),
        click.option(
            "--from",
            "from_model",
            default=None,
            metavar="trained/ID",
            help="Start from a trained model: its adapter trains on (same base model, checked).",
        ),
        click.option(
            "--beta", "dpo_beta", default=None, type=float, help="DPO: beta (default: the method's, per preset)."
        ),
        click.option(
            "--loss-type",
            "dpo_loss_type",
            multiple=True,
            help="DPO: trl loss type, repeatable (default sigmoid and sft: DPO plus a supervised term).",
        ),
        click.option("--num-generations", default=None, type=int, help="GRPO: completions per prompt."),
        click.option("--max-completion-length", default=None, type=int, help="GRPO: tokens per completion."),
        click.option("--kl-coef", default=None, type=float, help="GRPO: KL coefficient (trl's beta)."),
        click.option("--temperature", default=None, type=float, help="GRPO: sampling temperature of the completions."),
        click.option(
            "--reward",
            "rewards",
            multiple=True,
            metavar="NAME[=WEIGHT]",
            help="GRPO: a grader (built-in or a trainkit.rewards plugin), repeatable; rewards are summed with the weights.",
        ),
        click.option(
            "--openai-grader",
            "openai_graders",
            multiple=True,
            metavar="FILE",
            callback=_read_graders,
            help="GRPO: a JSON file holding one OpenAI grader (string_check, text_similarity, multi, python), "
            "repeatable; each is one more reward of weight 1.",
        ),
        click.option(
            "--reward-timeout",
            "reward_timeout_s",
            default=None,
            type=float,
            help="GRPO: seconds a grader call may take before the run fails (default 10).",
        ),
        click.option(
            "--report-to",
            default=None,
            type=click.Choice(["none", "tensorboard", "wandb"]),
            help="Also log to TensorBoard (runs/<id>/tensorboard on the models volume) or W&B.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _read_graders(ctx: click.Context, param: click.Parameter, paths: tuple[str, ...]) -> tuple[Any, ...]:
    """Each `--openai-grader FILE` as its JSON object (checked with the run's config)."""
    import json

    graders = []
    for path in paths:
        try:
            graders.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except OSError as exc:
            raise click.BadParameter(f"cannot read {path}: {exc.strerror or exc}", ctx, param) from None
        except ValueError as exc:
            raise click.BadParameter(f"{path} is not JSON: {exc}", ctx, param) from None
    return tuple(graders)


def budget_options(func: Any) -> Any:
    """`--max-cost` and `--max-duration` (shared with `trainkit sweep`, where they bound the whole group)."""
    func = click.option(
        "--max-duration",
        default=None,
        type=click.FloatRange(min=0, min_open=True),
        metavar="SECONDS",
        help="Stop gracefully (adapter saved, status stopped) after this much job time.",
    )(func)
    return click.option(
        "--max-cost",
        default=None,
        type=click.FloatRange(min=0, min_open=True),
        metavar="USD",
        help="Stop gracefully (adapter saved, status stopped) once the run has cost this much (see the price table).",
    )(func)


def config_values(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The given (non-None) `TrainConfig` fields out of the command's keyword arguments."""
    from trainkit_core.training.config import TrainConfig

    values = {k: v for k, v in kwargs.items() if k in TrainConfig.model_fields and v is not None}
    for name, value in list(values.items()):
        if isinstance(value, tuple):  # a repeatable option: absent when not given
            if value:
                values[name] = list(value)
            else:
                del values[name]
    return values
