"""SFT: supervised fine-tuning on conversations; the loss on the assistant's answers only.

The train job tokenizes each conversation into a row (`models.chat_format.encode_for_training`: labels -100
outside the answers) and trl's `SFTTrainer` trains on them (`training.backends.build_trainer`);
pictures go through the vision collator instead. The preset's own values are SFT's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainkit_core.training.methods.base import Method, MethodDefaults, TrainerInputs


class Sft(Method):
    name = "sft"
    formats = ("chat", "prompt_completion")
    defaults: Mapping[str, MethodDefaults] = {}  # the preset's values, exactly
    tokenizes_rows = True
    images = True
    packing = True

    def build_trainer(self, inputs: TrainerInputs) -> Any:
        from trainkit_core.training.backends import build_trainer

        return build_trainer(
            inputs.backend,
            inputs.model,
            inputs.tokenizer,
            inputs.rows,
            inputs.config,
            inputs.output_dir,
            inputs.callbacks,
            data_collator=inputs.data_collator,
            optimizer=inputs.optimizer,
        )


METHOD = Sft()
