"""DPO: trl's `DPOTrainer` on preference pairs, the starting model as the reference.

Defaults on the GPU presets: learning rate 5e-6, beta 0.1, one epoch, as in Unsloth's DPO
notebooks (Zephyr recipe: lr 5e-6, beta 0.1); trl's `DPOConfig` defaults to beta 0.1 and
loss "sigmoid". The loss adds trl's "sft" term (`loss_type=["sigmoid", "sft"]`, the RPO
recipe) because plain DPO on answers the starting model finds unlikely drives both answers
down (measured on tiny, 2026-12-01: docs/developer/facts.md). tiny: chosen with the learning
demonstrations of tests/core/test_methods_ml.py on a CPU (short, a higher learning rate).

Prompts are rendered in the run's chat format (`render_prompt`) and each answer ends
with the format's end of turn, as SFT trains it, so the tuned model learns where to
stop. The reference is the starting model: given a peft model and no reference, trl
1.16 copies the adapter, before any step, into a frozen adapter named "ref" (its fully
trained modules included, as the tiny preset's embeddings and head) and scores the
reference through it. So the reference is the base with a fresh adapter, or the
`--from` model as it was trained, at the memory cost of one more adapter, not a
second model. That copy is removed before the adapter is saved (`drop_reference`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.models.chat_format import ChatFormat, render_prompt
from trainkit_core.training.methods.base import Method, MethodDefaults, TrainerInputs, drop_reference

if TYPE_CHECKING:
    from trainkit_core.training.config import TrainConfig

#: trl's log keys -> trainkit's progress-event fields.
DPO_EVENT_FIELDS = {
    "rewards/chosen": "rewards_chosen",
    "rewards/rejected": "rewards_rejected",
    "rewards/margins": "reward_margin",
    "rewards/accuracies": "reward_accuracy",
}


def preference_rows(pairs: list[dict[str, Any]], fmt: ChatFormat) -> list[dict[str, str]]:
    """trl's standard preference rows: rendered prompt, and each answer as the chat format writes it.

    A text answer is closed by the end of turn; an answer that calls tools is written as a
    trained turn is (`chat_format.segments`: Gemma 4's call tokens and hand-over, Gemma 3's
    fenced JSON and end of turn).
    """
    from trainkit_core.evals.preference import with_answer
    from trainkit_core.models.chat_format import segments

    close = fmt.end_of_turn + "\n"

    def answer(pair: dict[str, Any], side: str) -> str:
        if not pair.get(f"{side}_calls"):
            return str(pair[side]) + close
        text, trained = segments(with_answer(pair, side), fmt, tools=pair.get("tools"))[-1]
        assert trained  # the answer's own piece
        return text

    return [
        {
            "prompt": render_prompt(p["messages"], fmt, tools=p.get("tools")),
            "chosen": answer(p, "chosen"),
            "rejected": answer(p, "rejected"),
        }
        for p in pairs
    ]


def build_dpo_trainer(
    backend: str,
    model: Any,
    tokenizer: Any,
    pairs: list[dict[str, Any]],
    fmt: ChatFormat,
    config: TrainConfig,
    output_dir: Path,
    callbacks: list[Any],
) -> Any:
    """trl's `DPOTrainer` (Unsloth's patched one where `import unsloth` ran first on a GPU) over the pairs."""
    if backend == "unsloth":
        import unsloth

        # Unsloth's DPO notebooks call it before the trainer. In 2026.10 it does nothing: on a
        # GPU `import unsloth` already replaced trl's trainers (`PatchFastRL` at import), and
        # its CPU fallback has no such function and leaves trl's trainers as they are.
        patch = getattr(unsloth, "PatchDPOTrainer", None)
        if patch is not None:
            patch()
    from trl import DPOConfig, DPOTrainer

    from datasets import Dataset  # type: ignore[attr-defined]
    from trainkit_core.training.backends import trainer_arguments

    args = DPOConfig(
        **trainer_arguments(backend, config, output_dir),
        beta=config.dpo_beta if config.dpo_beta is not None else 0.1,
        loss_type=list(config.dpo_loss_type or ["sigmoid"]),
        max_length=config.max_seq_length,
        remove_unused_columns=False,
    )
    trainer = DPOTrainer(
        model=model,
        ref_model=None,  # the starting model, as a frozen copy of the adapter (see the module docstring)
        args=args,
        train_dataset=Dataset.from_list(preference_rows(pairs, fmt)),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer


#: The reference's forward pass over each trained token, against a training step's forward and
#: backward (about 3 forwards' work): what the plan adds per token.
REFERENCE_PASS_WORK = 1 / 3

_GPU = MethodDefaults(
    learning_rate=5e-6,
    epochs=1.0,
    warmup_steps=5,
    lr_scheduler="linear",
    dpo_beta=0.1,
    dpo_loss_type=("sigmoid", "sft"),
)


class Dpo(Method):
    name = "dpo"
    formats = ("preference",)
    options = ("dpo_beta", "dpo_loss_type")
    defaults: Mapping[str, MethodDefaults] = {
        "tiny": MethodDefaults(
            learning_rate=5e-3,
            steps=60,
            batch_size=8,
            warmup_steps=0,
            lr_scheduler="constant",
            dpo_beta=0.1,
            dpo_loss_type=("sigmoid", "sft"),
        ),
        "": _GPU,  # every GPU preset, and a base model given by id
    }

    def event_fields(self, config: TrainConfig) -> dict[str, str]:
        return DPO_EVENT_FIELDS

    def build_trainer(self, inputs: TrainerInputs) -> Any:
        return build_dpo_trainer(
            inputs.backend,
            inputs.model,
            inputs.tokenizer,
            inputs.dataset.train,
            inputs.fmt,
            inputs.config,
            inputs.output_dir,
            inputs.callbacks,
        )

    def before_save(self, trainer: Any) -> None:
        drop_reference(trainer.model)

    def as_conversations(self, train: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from trainkit_core.evals.preference import with_answer

        return [
            {"messages": with_answer(e, side), "tools": e.get("tools")}
            for e in train
            for side in ("chosen", "rejected")
        ]

    def work(
        self, config: TrainConfig, counts: list[int], train: list[dict[str, Any]]
    ) -> tuple[list[int], float, list[str]]:
        pairs = [counts[i] + counts[i + 1] for i in range(0, len(counts) - 1, 2)]
        note = (
            f"dpo: both answers of each pair are trained on; the reference's forward pass adds "
            f"{REFERENCE_PASS_WORK:.2f} of a training step's work per token (estimate)"
        )
        return pairs, 1 + REFERENCE_PASS_WORK, [note]


METHOD = Dpo()
