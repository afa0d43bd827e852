"""What a training method is: the questions the train job, the plan and the submission ask it.

Each of sft, dpo and grpo is one module of this package defining one `Method`; the registry
(`trainkit_core.training.methods.METHODS`) is where `--method NAME` is looked up. Nothing
outside this package compares a method's name: a new method (say KTO) is one module here,
its entry in the registry, and its tests.

A `Method` answers with data where it can (formats, defaults, options) and with small
functions where it must (how its trainer is built, what its plan counts). The defaults of
the base class are SFT's plain behaviour, so a method overrides only where it differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit_core.models.chat_format import ChatFormat
    from trainkit_core.runs.training_run import TrainingRun
    from trainkit_core.training.config import TrainConfig


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


@dataclass
class TrainerInputs:
    """What the train job hands a method to build its trainer from."""

    run: TrainingRun
    config: TrainConfig
    fmt: ChatFormat
    dataset: Any  # the synced dataset (`datasets.reader.SyncedDataset`): train and eval examples
    rows: list[Any]  # the job's tokenized rows, for a method that `tokenizes_rows`
    backend: str
    model: Any
    tokenizer: Any
    output_dir: Path
    callbacks: list[Any]
    data_collator: Any = None  # pictures: the vision collator
    optimizer: Any = None  # pictures on the hf backend: the vision optimizer


class Method:
    """One training method (see the module docstring). Subclasses set the class attributes."""

    #: The name `--method` takes.
    name: str = ""
    #: The dataset formats it trains on (`dataset.toml`'s `format`).
    formats: tuple[str, ...] = ()
    #: Its defaults per preset name; "" is every other preset and a base model given by id.
    defaults: Mapping[str, MethodDefaults] = {}
    #: `TrainConfig` fields that belong to this method alone (refused with any other).
    options: tuple[str, ...] = ()
    #: The job tokenizes its conversations into rows (else trl tokenizes the method's own data).
    tokenizes_rows: bool = False
    #: It trains on pictures (the vision collator), and with `--packing`.
    images: bool = False
    packing: bool = False
    #: The job records sample generations at each checkpoint (a method may record its own).
    records_rollouts: bool = True

    def defaults_for(self, preset_name: str) -> MethodDefaults:
        """The defaults for a preset (a twin takes its real preset's: tiny's on CPU)."""
        if preset_name in self.defaults:
            return self.defaults[preset_name]
        if preset_name.startswith("tiny"):
            return self.defaults.get("tiny", MethodDefaults())
        return self.defaults.get("", MethodDefaults())

    def check_request(self, config: TrainConfig) -> None:
        """Refuse, before anything starts, what this method cannot train (`UsageError`)."""

    def event_fields(self, config: TrainConfig) -> dict[str, str]:
        """trl's log keys -> progress-event fields, beyond the loss every method logs."""
        return {}

    def build_trainer(self, inputs: TrainerInputs) -> Any:
        raise NotImplementedError

    def before_save(self, trainer: Any) -> None:
        """Anything to remove from the trained model before its adapter is saved."""

    def training_summary(self, log_history: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
        """(metrics, warnings) about whether training did what this method is for, from trl's logs.

        Called once training ended, before the adapter is saved; the warnings go to the
        run's events as they are (a run that did not learn says so at its end).
        """
        return {}, []

    def train_examples(self, rows: list[Any], dataset: Any) -> int:
        """How many examples it trained on (the job's rows, or the dataset's own)."""
        return len(rows) if self.tokenizes_rows else len(dataset.train)

    # -------------------------------------------------------------- the plan

    def as_conversations(self, train: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What it trains on, as conversations whose tokens the plan counts."""
        return train

    def completions_per_example(self, config: TrainConfig) -> int:
        return 1

    def micro_batch(self, config: TrainConfig, batch: int) -> int:
        """The batch of one step as the trainer counts it (GRPO: completions, whole groups)."""
        return batch

    def work(
        self, config: TrainConfig, counts: list[int], train: list[dict[str, Any]]
    ) -> tuple[list[int], float, list[str]]:
        """(tokens per example, work per token relative to SFT training, notes for the plan); `train`: the lines."""
        return counts, 1.0, []


def drop_reference(model: Any) -> None:
    """Remove the frozen "ref" adapter trl adds, so that only the trained adapter is saved and served.

    trl 1.16's DPO trainer always, and its GRPO trainer when the KL term is on, copy the
    starting adapter into one named "ref" to score the reference through it; peft would
    save it beside the trained one (a ``ref/`` folder, as large again).
    """
    if "ref" in getattr(model, "peft_config", {}):
        model.set_adapter("default")
        model.delete_adapter("ref")
