"""`TrainConfig`: what a user asks of a training run, checked before anything starts.

Fields left unset take the preset's defaults (`resolve()` fills them in, so the stored
config of a run says exactly what was trained). `model_size` names a preset; a
`base_model` (any Hugging Face id) replaces it, with the defaults of a 4b-class
model. Validation errors are `UsageError`s naming the field (`TrainConfig.parse`).
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trainkit_core.errors import UsageError
from trainkit_core.ids import check_name
from trainkit_core.models.presets import (
    CUSTOM_DEFAULTS,
    PRESETS,
    TWIN_PRESETS,
    Preset,
    chat_format_for_model,
    get_preset,
)
from trainkit_core.training.methods import METHODS, find_method, get_method

#: trl's DPO loss types (`DPOConfig.loss_type`, trl 0.24 to 1.x): another name would start a run
#: that fails inside trl, so it is refused before anything starts.
DPO_LOSS_TYPES = (
    "sigmoid",
    "hinge",
    "ipo",
    "exo_pair",
    "nca_pair",
    "robust",
    "bco_pair",
    "sppo_hard",
    "aot",
    "aot_unpaired",
    "apo_zero",
    "apo_down",
    "discopop",
    "sft",
    "sigmoid_norm",
)
#: The float fields, checked for NaN and infinities before their bounds (a NaN compares false
#: with every bound, which pydantic reports as "should be less than or equal to N").
FLOAT_FIELDS = (
    "epochs",
    "learning_rate",
    "lora_dropout",
    "weight_decay",
    "dpo_beta",
    "kl_coef",
    "temperature",
    "reward_timeout_s",
    "vision_learning_rate",
)

Backend = Literal["auto", "hf", "unsloth"]


class TrainConfig(BaseModel):
    """One training run's settings. Unset values come from the preset."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    dataset: str = Field(description="Name of the dataset (synced to the data volume).")
    model_size: str | None = Field(None, description="Preset: tiny, 4b, 12b or 31b. Default tiny.")
    base_model: str | None = Field(
        None, description="Any Hugging Face id, an absolute model folder, or hf-cache:FOLDER, instead of a preset."
    )
    chat_format: Literal["gemma3", "gemma4"] | None = None
    steps: int | None = Field(None, ge=1, le=1_000_000)
    epochs: float | None = Field(None, gt=0, le=1000)
    learning_rate: float | None = Field(None, gt=0, le=1)
    lora_r: int | None = Field(None, ge=1, le=1024)
    lora_alpha: int | None = Field(None, ge=1, le=4096)
    lora_dropout: float | None = Field(None, ge=0, lt=1)
    batch_size: int | None = Field(None, ge=1, le=4096)
    grad_accum: int | None = Field(None, ge=1, le=1024)
    max_seq_length: int | None = Field(None, ge=8, le=131072)
    warmup_steps: int | None = Field(None, ge=0, le=1_000_000)
    lr_scheduler: Literal["constant", "linear", "cosine"] | None = None
    weight_decay: float | None = Field(None, ge=0, le=1)
    save_every: int = Field(50, ge=1, le=1_000_000, description="Save a checkpoint every N optimizer steps.")
    #: Every random number generator the job seeds takes 32 bits (numpy refuses more).
    seed: int = Field(42, ge=0, le=2**32 - 1)
    backend: Backend = "auto"
    gpu: str | None = Field(None, description="GPU for this run; default TRAINKIT_GPU, else the preset's.")
    load_in_4bit: bool | None = None
    modules_to_save: list[str] | None = Field(
        None,
        description="Modules trained in full and saved with the adapter (peft modules_to_save); default the preset's.",
    )
    keep_checkpoints: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="Keep the last N checkpoints (and the best by eval loss when the dataset has an eval split); default all.",
    )
    method: str = Field(
        "sft",
        description="The training method (trainkit_core.training.methods): sft (chat data), dpo (preference pairs) "
        "or grpo (prompts and graders).",
    )
    from_model: str | None = Field(
        None,
        description="Start from a trained model, trained/<run id> (or one of its checkpoints): its adapter trains on "
        "(the base must be the same).",
    )
    dpo_beta: float | None = Field(None, gt=0, le=100, description="DPO: beta (how far from the reference).")
    dpo_loss_type: list[str] | None = Field(
        None, description="DPO: trl loss types, e.g. sigmoid, or sigmoid and sft (DPO plus a supervised term)."
    )
    num_generations: int | None = Field(None, ge=2, le=256, description="GRPO: completions per prompt.")
    max_completion_length: int | None = Field(None, ge=1, le=131072, description="GRPO: tokens per completion.")
    kl_coef: float | None = Field(None, ge=0, le=100, description="GRPO: KL coefficient (trl's beta).")
    temperature: float | None = Field(None, gt=0, le=10, description="GRPO: sampling temperature of the completions.")
    rewards: list[str] | None = Field(
        None, description="GRPO: graders as NAME or NAME=WEIGHT (built-in or from a trainkit.rewards plugin)."
    )
    openai_graders: list[dict[str, Any]] | None = Field(
        None,
        description=(
            "GRPO: OpenAI grader objects (string_check, text_similarity, multi), each one more reward of weight 1 "
            "(trainkit_core.rewards.openai_graders)."
        ),
    )
    reward_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="GRPO: a grader call running longer fails the run."
    )
    report_to: Literal["none", "tensorboard", "wandb"] = Field(
        "none",
        description="Also log to TensorBoard (event files under runs/<id>/tensorboard on the models volume) or "
        "Weights & Biases; trainkit's own events stay the record.",
    )

    finetune_vision_layers: bool | None = Field(
        None,
        description="On an image dataset, also train the vision layers: the tower and the projector in full "
        "(hf backend), or LoRA on the tower (unsloth backend: Unsloth's own finetune_vision_layers); saved with "
        "the adapter; default the preset's (off for the real presets).",
    )
    finetune_audio_layers: bool | None = Field(
        None,
        description="On an audio dataset (Gemma 4 E2B/E4B), also train the audio tower and its projection in full "
        "(hf backend); saved with the adapter; default the preset's (off for the real presets).",
    )
    vision_learning_rate: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Learning rate of the towers (vision tower and projector, audio tower and projection) when "
        "finetune_vision_layers or finetune_audio_layers trains them (hf backend, sft); default the preset's, "
        "else learning_rate.",
    )
    packing: bool = Field(
        False,
        description="SFT: pack several examples into each row of max_seq_length tokens, padding-free (position ids "
        "restart per example, no attention across examples); batch_size then counts packed rows. Text only, hf backend.",
    )
    keep_thinking: bool = Field(
        True,
        description="Train on the assistant's thinking (reasoning_content) where the data has it (Gemma 4); false "
        "drops it, so the model learns to answer directly.",
    )
    processes: int = Field(
        1,
        ge=1,
        le=64,
        description="Train one run on N CPU processes (gloo, local provider): the distributed code path N GPUs run. "
        "batch_size stays the global batch of a step and must divide by it.",
    )
    strategy: Literal["auto", "ddp", "fsdp"] = Field(
        "auto",
        description="How a run on several ranks splits the work: ddp (a whole copy of the model per rank, to go "
        "faster), fsdp (parameters, gradients and optimizer state sharded over the ranks, for a model that does not "
        "fit one GPU), or auto (ddp when the weights fit one GPU with room to train, else fsdp; the plan says why).",
    )
    gpus: int = Field(
        1,
        ge=1,
        le=64,
        description="GPUs per node for this run, one rank each (ddp); gpu's ':N' says the same and must agree. "
        "batch_size stays per GPU, so the global batch grows with the GPUs. A provider that cannot place that "
        "many refuses before anything starts.",
    )
    nodes: int = Field(1, ge=1, le=64, description="Machines for this run, where the provider declares it can.")

    @field_validator("dataset")
    @classmethod
    def _dataset_name(cls, value: str) -> str:
        try:
            check_name(value, what="dataset name")
        except UsageError as exc:
            raise ValueError(exc.message) from None
        return value

    @field_validator("from_model")
    @classmethod
    def _from_trained(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from trainkit_core.models.trained.paths import parse_model_path

        value = value.strip()
        if value.startswith("run-"):
            value = f"trained/{value}"  # a bare run id names its final model
        try:
            return parse_model_path(value).path
        except UsageError as exc:
            raise ValueError(exc.message) from None

    @field_validator("rewards")
    @classmethod
    def _reward_specs(cls, value: list[str] | None) -> list[str] | None:
        from trainkit_core.rewards.reward_choice import parse_reward

        for spec in value or []:
            parse_reward(spec)
        return value

    @field_validator("openai_graders")
    @classmethod
    def _openai_graders(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        from trainkit_core.rewards.openai_graders import check

        if value is not None and len(value) > 16:
            raise ValueError("at most 16 graders")
        try:
            return None if value is None else [check(spec, f"openai_graders[{i}]") for i, spec in enumerate(value)]
        except UsageError as exc:
            raise ValueError(exc.message) from None

    @field_validator(*FLOAT_FIELDS, mode="before")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        return check_finite(value)

    @field_validator("dpo_loss_type")
    @classmethod
    def _loss_types(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("give at least one loss type")
        for name in value or []:
            if name not in DPO_LOSS_TYPES:
                raise ValueError(f"unknown loss type {name[:60]!r}; known loss types: {', '.join(DPO_LOSS_TYPES)}")
        return value

    @field_validator("modules_to_save")
    @classmethod
    def _module_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            # Dotted names of submodules; a part starting with '_' is an attribute of Python
            # objects (`__class__`), never a layer, which peft would silently match nothing to.
            if len(name) > 200 or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9][A-Za-z0-9_]*)*", name):
                raise ValueError(f"{name!r} is not a module name (dotted names of letters, digits and '_')")
        return value

    @field_validator("gpu")
    @classmethod
    def _gpu_name(cls, value: str | None) -> str | None:
        # A provider's GPU spelling: a name, '!' or '+' (Modal's upgrade rules), ':N' for several.
        if (
            value is not None
            and value != ""
            and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}[!+]?(:[1-9][0-9]?)?", value)
        ):
            raise ValueError(f"{value[:60]!r} is not a GPU name (like H100, A100-80GB or H100:2)")
        return value

    @field_validator("model_size")
    @classmethod
    def _known_size(cls, value: str | None) -> str | None:
        if value is not None and value not in PRESETS and value not in TWIN_PRESETS:
            raise ValueError(f"unknown model size {value!r}; known sizes: {', '.join(PRESETS)}")
        return value

    @field_validator("base_model")
    @classmethod
    def _hf_id(cls, value: str | None) -> str | None:
        if value is not None:
            from trainkit_core.models.base_models import check_text

            value = check_text(value.strip())
        return value

    @model_validator(mode="after")
    def _one_of(self) -> TrainConfig:
        if self.model_size and self.base_model:
            raise ValueError("give model_size or base_model, not both")
        if self.steps is not None and self.epochs is not None:
            raise ValueError("give steps or epochs, not both")
        method = find_method(self.method)
        if method is None:
            raise ValueError(f"unknown method {self.method!r}; expected {', '.join(METHODS)}")
        for other in METHODS.values():
            for name in other.options:
                if other is not method and getattr(self, name) is not None:
                    raise ValueError(f"{name} is an option of --method {other.name}, not of {self.method}")
        if self.packing and not method.packing:
            with_packing = " or ".join(m.name for m in METHODS.values() if m.packing)
            raise ValueError(f"packing is an option of --method {with_packing}, not of {self.method}")
        if self.packing and self.backend == "unsloth":
            raise ValueError("packing runs on the hf backend only (unsloth's attention was never checked with it)")
        if self.processes > 1 and self.batch_size is not None and self.batch_size % self.processes:
            # Unset, it is checked once the preset's batch fills it in (`resolve` validates again).
            raise ValueError(
                f"batch_size {self.batch_size} is the global batch of a step: it must be a multiple of "
                f"processes {self.processes} (each process takes batch_size / processes)"
            )
        self._agree_on_gpu_count()
        if self.processes > 1 and self.gpus * self.nodes > 1:
            raise ValueError(
                f"processes {self.processes} and gpus {self.gpus} x nodes {self.nodes}: give --processes for CPU "
                "processes or --gpus/--nodes for GPUs, not both"
            )
        if self.strategy == "fsdp" and self.processes * self.gpus * self.nodes == 1:
            raise ValueError("strategy fsdp shards the model over several ranks: give --processes N or --gpus N")
        from trainkit_core.training.sharding import refusal

        refused = refusal(self, self.strategy)
        if refused:
            raise ValueError(f"strategy {self.strategy}: {refused}")
        return self

    # ------------------------------------------------------------------ helpers

    def _agree_on_gpu_count(self) -> None:
        """`gpus` is the one source of truth; a ``gpu`` of ``"H100:2"`` sets it, a different `gpus` is refused.

        Both spellings exist (``--gpu H100:2`` predates ``--gpus``), so they must never say two things.
        """
        count = (self.gpu or "").partition(":")[2]
        if not count:
            return
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"gpu {self.gpu!r}: the count after ':' must be a whole number of GPUs")
        if "gpus" in self.model_fields_set and self.gpus != int(count):
            raise ValueError(f"gpu {self.gpu!r} asks for {count} GPUs but gpus is {self.gpus}: give one of them")
        object.__setattr__(self, "gpus", int(count))
        self.model_fields_set.add("gpus")

    @classmethod
    def parse(cls, data: dict[str, Any] | None = None, **fields: Any) -> TrainConfig:
        """Build from user input; `UsageError` naming each bad field."""
        values = {**(data or {}), **fields}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise UsageError(f"invalid training config: {describe_errors(exc)}") from None

    @property
    def preset(self) -> Preset:
        if self.base_model:
            return CUSTOM_DEFAULTS
        return get_preset(self.model_size or "tiny")

    @property
    def preset_name(self) -> str:
        return "" if self.base_model else (self.model_size or "tiny")

    def resolve(self, *, gpu_override: str = "") -> TrainConfig:
        """A copy with every unset value taken from the preset (what the run records)."""
        preset = self.preset
        values = self.model_dump()
        if not self.base_model:
            values["model_size"] = self.preset_name
        by_method = get_method(self.method).defaults_for(self.preset_name).values()
        if values["steps"] is not None or values["epochs"] is not None:
            by_method.pop("steps", None)  # the user chose the length
            by_method.pop("epochs", None)
        for key, default in by_method.items():
            if values.get(key) is None:
                values[key] = default
        defaults = {
            "chat_format": chat_format_for_model(self.base_model) if self.base_model else preset.chat_format,
            "learning_rate": preset.learning_rate,
            "lora_r": preset.lora_r,
            "lora_alpha": preset.lora_alpha,
            "lora_dropout": preset.lora_dropout,
            "batch_size": preset.batch_size,
            "grad_accum": preset.grad_accum,
            "max_seq_length": preset.max_seq_length,
            "warmup_steps": preset.warmup_steps,
            "lr_scheduler": preset.lr_scheduler,
            "weight_decay": preset.weight_decay,
            "gpu": gpu_override or preset.gpu,
            "load_in_4bit": preset.load_in_4bit,
            "modules_to_save": list(preset.modules_to_save),
            "finetune_vision_layers": preset.finetune_vision_layers,
            "finetune_audio_layers": preset.finetune_audio_layers,
            "vision_learning_rate": preset.vision_learning_rate,
        }
        for key, default in defaults.items():
            if values.get(key) is None:
                values[key] = default
        count = (values["gpu"] or "").partition(":")[2]
        if "gpus" not in self.model_fields_set and count.isdigit():
            values["gpus"] = int(count)  # TRAINKIT_GPU=H100:2 asks for two, as a run's gpu does
        values["gpu"] = with_gpu_count(values["gpu"], values["gpus"])
        if values["steps"] == 1 and values["warmup_steps"]:
            # Warm-up starts at learning rate 0: a one-step run would learn nothing and fail its adapter gate.
            if self.warmup_steps:
                raise UsageError(
                    f"steps 1 with warmup_steps {self.warmup_steps}: the only step would run at learning rate 0",
                    hint="give more steps, or warmup_steps 0",
                )
            values["warmup_steps"] = 0
        if values["steps"] is None and values["epochs"] is None:
            # The preset's length: a step count (tiny) or a number of epochs (the GPU presets).
            if preset.steps is not None:
                values["steps"] = preset.steps
            else:
                values["epochs"] = preset.epochs or 1.0
        try:
            return TrainConfig.model_validate(values)
        except ValidationError as exc:  # a default that does not fit a choice of the user's (processes)
            raise UsageError(
                f"invalid training config once the defaults are filled in: {describe_errors(exc)}",
                hint="give --batch-size explicitly",
            ) from None

    @property
    def resolved_base_model(self) -> str:
        """The base model this config trains: `base_model` when given, else its preset's."""
        return self.base_model or self.preset.base_model


def with_gpu_count(gpu: str | None, gpus: int) -> str | None:
    """The GPU kind with the run's count, as a provider spells it: ``("H100", 2)`` -> ``"H100:2"``."""
    kind = (gpu or "").partition(":")[0]
    if not kind:
        return gpu
    return f"{kind}:{gpus}" if gpus > 1 else kind


def check_finite(value: Any) -> Any:
    """`value`, or a ValueError saying it is not a number (NaN) or not finite, before any bound is compared."""
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value  # not a number at all: pydantic says so in its own words
    if isinstance(number, float) and math.isnan(number):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(number, float) and math.isinf(number):
        raise ValueError(f"{value!r} is not a finite number")
    return value


def describe_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "config"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


#: Names a sweep grid may vary.
TUNABLE_FIELDS = tuple(
    name
    for name in TrainConfig.model_fields
    if name
    not in (
        "dataset",
        "model_size",
        "base_model",
        "backend",
        "gpu",
        "modules_to_save",
        "from_model",
        "rewards",
        "dpo_loss_type",
        "finetune_vision_layers",
        "finetune_audio_layers",
    )
)
