"""Training methods: what `--method sft|dpo|grpo` means. Data and lookup only.

A method names the dataset format it trains on and its defaults per preset. A
`TrainConfig` value the user leaves unset comes from the method's defaults for the
preset first, then from the preset itself (`TrainConfig.resolve`), so SFT keeps the
preset's values exactly and the stored config of a run says what was trained.

Sources of the defaults (also in docs/tutorials/preference-and-reward.md):

- DPO on the GPU presets: learning rate 5e-6, beta 0.1, one epoch, as in Unsloth's DPO
  notebooks (Zephyr recipe: lr 5e-6, beta 0.1); trl's `DPOConfig` defaults to beta 0.1
  and loss "sigmoid". The loss adds trl's "sft" term (`loss_type=["sigmoid", "sft"]`,
  the RPO recipe) because plain DPO on answers the starting model finds unlikely drives
  both answers down (measured on tiny, 2026-12-01: docs/developer/facts.md).
- GRPO on the GPU presets: learning rate 5e-6, 8 generations per prompt, completions of
  at most 256 tokens, KL coefficient 0.0 (trl's `GRPOConfig` defaults since trl 0.19:
  beta 0.0; Unsloth's GRPO notebooks: lr 5e-6, 6-8 generations, 200-256 tokens).
- tiny: chosen with the learning demonstrations of tests/core/test_methods_ml.py on a CPU
  (short, a higher learning rate: the tiny model's vocabulary is its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainkit_core.errors import UsageError

#: The dataset format each method trains on (`dataset.toml`'s `format`).
METHOD_FORMATS: dict[str, tuple[str, ...]] = {
    "sft": ("chat", "prompt_completion"),
    "dpo": ("preference",),
    "grpo": ("prompt",),
}
METHODS = tuple(METHOD_FORMATS)


@dataclass(frozen=True)
class MethodDefaults:
    """Values a method sets before the preset's own (None: the preset's, or the method's library default)."""

    learning_rate: float | None = None
    steps: int | None = None
    epochs: float | None = None
    batch_size: int | None = None
    warmup_steps: int | None = None
    lr_scheduler: str | None = None
    dpo_beta: float | None = None
    dpo_loss_type: tuple[str, ...] = ()
    num_generations: int | None = None
    max_completion_length: int | None = None
    kl_coef: float | None = None
    temperature: float | None = None
    rewards: tuple[str, ...] = field(default=())

    def values(self) -> dict[str, Any]:
        """The set values, as `TrainConfig` fields."""
        data = {
            "learning_rate": self.learning_rate,
            "steps": self.steps,
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "warmup_steps": self.warmup_steps,
            "lr_scheduler": self.lr_scheduler,
            "dpo_beta": self.dpo_beta,
            "dpo_loss_type": list(self.dpo_loss_type) or None,
            "num_generations": self.num_generations,
            "max_completion_length": self.max_completion_length,
            "kl_coef": self.kl_coef,
            "temperature": self.temperature,
        }
        return {key: value for key, value in data.items() if value is not None}


_GPU_DPO = MethodDefaults(
    learning_rate=5e-6,
    epochs=1.0,
    warmup_steps=5,
    lr_scheduler="linear",
    dpo_beta=0.1,
    dpo_loss_type=("sigmoid", "sft"),
)
_GPU_GRPO = MethodDefaults(
    learning_rate=5e-6,
    epochs=1.0,
    warmup_steps=5,
    lr_scheduler="linear",
    num_generations=8,
    max_completion_length=256,
    kl_coef=0.0,
    temperature=1.0,
)

#: Per method, per preset name ("" is a base model given by id: the 4b-class defaults).
METHOD_DEFAULTS: dict[str, dict[str, MethodDefaults]] = {
    "sft": {},
    "dpo": {
        "tiny": MethodDefaults(
            learning_rate=5e-3,
            steps=60,
            batch_size=8,
            warmup_steps=0,
            lr_scheduler="constant",
            dpo_beta=0.1,
            dpo_loss_type=("sigmoid", "sft"),
        ),
        "4b": _GPU_DPO,
        "12b": _GPU_DPO,
        "31b": _GPU_DPO,
        "": _GPU_DPO,
    },
    "grpo": {
        "tiny": MethodDefaults(
            # 5e-3 (DPO's) rewarded the right completions for 30 steps, then collapsed into
            # gibberish; 1e-3 took the demonstration's exact match from 0 to 0.97 in 40 steps.
            learning_rate=1e-3,
            steps=40,
            batch_size=8,
            warmup_steps=0,
            lr_scheduler="constant",
            num_generations=4,
            max_completion_length=8,
            kl_coef=0.0,
            temperature=1.0,
        ),
        "4b": _GPU_GRPO,
        "12b": _GPU_GRPO,
        "31b": _GPU_GRPO,
        "": _GPU_GRPO,
    },
}


def method_defaults(method: str, preset_name: str) -> MethodDefaults:
    """The defaults of `method` for a preset (a twin takes its real preset's: tiny's on CPU)."""
    if method not in METHOD_FORMATS:
        raise UsageError(f"unknown method {method!r}; expected {', '.join(METHODS)}")
    table = METHOD_DEFAULTS[method]
    if preset_name in table:
        return table[preset_name]
    if preset_name.startswith("tiny"):
        return table.get("tiny", MethodDefaults())
    return table.get("", MethodDefaults())


def check_format(method: str, dataset_format: str, dataset: str) -> None:
    """`UsageError` when `dataset`'s format is not one `method` trains on (before anything starts)."""
    formats = METHOD_FORMATS.get(method, ())
    if dataset_format in formats:
        return
    wanted = " or ".join(f'"{f}"' for f in formats)
    for other, other_formats in METHOD_FORMATS.items():
        if dataset_format in other_formats:
            hint = f"--method {other} trains on {dataset_format} data"
            break
    else:
        hint = f"set format = {wanted} in its dataset.toml"
    raise UsageError(
        f"dataset {dataset!r} has format {dataset_format!r}, but --method {method} trains on {wanted} data", hint=hint
    )


def grpo_batch(batch_size: int, generations: int) -> int:
    """GRPO's batch in completions: a whole number of groups, at least one (trl's rule)."""
    return max(generations, (batch_size // generations) * generations)
