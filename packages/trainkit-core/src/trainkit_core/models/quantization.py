"""The one 4-bit recipe (bitsandbytes NF4) used by training and by inference.

An adapter trained against a 4-bit base must be served on the same quantised base,
or its outputs drift; keeping the recipe in one place makes that the default.
"""

from __future__ import annotations

from typing import Any


def bnb_4bit_config() -> Any:
    """A `transformers.BitsAndBytesConfig` for NF4 with bf16 compute (CUDA only)."""
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.bfloat16,
        bnb_4bit_use_double_quant=True,
    )
