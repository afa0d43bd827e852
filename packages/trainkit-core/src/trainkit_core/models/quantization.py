"""The one 4-bit recipe (bitsandbytes NF4) used by training and by inference.

An adapter trained against a 4-bit base must be served on the same quantised base,
or its outputs drift; keeping the recipe in one place makes that the default.
"""

from __future__ import annotations

from typing import Any


def bnb_4bit_config(shardable: bool = False) -> Any:
    """A `transformers.BitsAndBytesConfig` for NF4 with bf16 compute (CUDA only).

    `shardable` stores the packed 4-bit weights as bf16 instead of uint8: FSDP shards float
    tensors only (bitsandbytes' FSDP-QLoRA guide), and every sharded tensor must share a dtype.
    """
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.bfloat16,
        bnb_4bit_use_double_quant=True,
        **({"bnb_4bit_quant_storage": torch.bfloat16} if shardable else {}),
    )
