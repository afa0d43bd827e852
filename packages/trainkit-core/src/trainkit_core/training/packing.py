"""Padding-free packing (`--packing`) for SFT, on trl's and transformers' own support.

trl's `SFTConfig(packing=True)` with its default "bfd" strategy packs whole examples into
rows of up to `max_length` tokens (best fit decreasing, never splitting an example) and
turns on padding-free batching: its collator concatenates a batch into one row, with
`position_ids` restarting at 0 at each example and the first token of each example's
labels masked (that label would be predicted from the previous example's last token).
transformers then keeps the examples apart from those position ids: for eager, sdpa and
flex attention `masking_utils.find_packed_sequence_indices` turns them into a
block-diagonal causal mask, and flash attention gets trl's `cu_seq_lens`. So each
example's loss is the one it has alone (tests/core/test_packing_ml.py checks it on the
tiny model and the twins), and trainkit's assistant-only labels pass through unchanged.

Where the boundaries would not be kept, packing is refused rather than training on
examples that see each other:

- transformers detects packed rows only when no attention mask and no cache are passed:
  trl's collator passes no mask, trl's loss and trainkit's CPU loss pass `use_cache=False`;
- an attention implementation outside `BOUNDARY_ATTENTION` (a kernel of a model's own)
  gets no block-diagonal mask;
- a model type outside `PACKED_MODEL_TYPES` has not been checked here;
- the unsloth backend patches attention and trl themselves (not installed here, never
  checked): `--packing` runs on the hf backend;
- image runs: trainkit's vision collator batches whole conversations with their pixels,
  and trl refuses packing for vision data (`SFTTrainer`: "Packing is not supported for
  vision datasets").

`batch_size` then counts packed rows, not examples: `packed_rows` counts them for the plan.
"""

from __future__ import annotations

import bisect
from typing import Any

from trainkit_core.errors import JobError

#: Attention implementations for which transformers (5.x) keeps packed examples apart:
#: the mask functions of eager, sdpa and flex from restarting position ids, flash attention
#: from `cu_seq_lens`.
BOUNDARY_ATTENTION = ("eager", "sdpa", "flex_attention", "flash_attention_2", "flash_attention_3")

#: Model types whose packed forward pass matches each example's alone (checked on the tiny
#: model and the Gemma 3 and Gemma 4 twins, whose architectures are the presets').
PACKED_MODEL_TYPES = ("gemma3_text", "gemma3", "gemma4", "gemma4_text")

#: trl's packing strategy: whole examples, best fit decreasing ("bfd_split" would cut long
#: ones, whose second half would lose its prompt).
STRATEGY = "bfd"


def sft_arguments(packing: bool) -> dict[str, Any]:
    """The `SFTConfig` arguments of packing on or off."""
    if not packing:
        return {"packing": False}
    return {"packing": True, "packing_strategy": STRATEGY, "padding_free": True}


def check_model(model: Any, backend: str, data_collator: Any) -> None:
    """Refuse packing (`JobError`, naming why) where the examples of a packed row would attend to each other."""
    if data_collator is not None:
        raise JobError(
            "--packing is not supported on image datasets: the vision collator batches whole conversations "
            "with their pixels, and trl packs text only; train without --packing"
        )
    if backend != "hf":
        raise JobError(
            f"--packing runs on the hf backend only: the {backend} backend's attention was never checked to keep "
            "packed examples apart; give --backend hf, or train without --packing"
        )
    config = model.config
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in BOUNDARY_ATTENTION:
        raise JobError(
            f"--packing needs an attention that keeps packed examples apart ({', '.join(BOUNDARY_ATTENTION)}); "
            f"this model uses {attention!r}, whose examples would attend to each other; train without --packing"
        )
    model_type = getattr(config, "model_type", "")
    if model_type not in PACKED_MODEL_TYPES:
        raise JobError(
            f"--packing was checked on {', '.join(PACKED_MODEL_TYPES)} models only, not on {model_type!r}: "
            "its packed examples might attend to each other; train without --packing"
        )


def packed_rows(lengths: list[int], capacity: int) -> int:
    """How many rows of `capacity` tokens trl's "bfd" packing makes of examples of `lengths` tokens.

    Best fit decreasing as trl's `pack_dataset` does it: the longest example first, each
    into the fullest row it still fits in, else a new row (an example longer than a row
    is cut to it, as trl does; the job's examples never are).
    """
    free: list[int] = []  # the room left in each row, sorted
    for length in sorted((min(n, capacity) for n in lengths), reverse=True):
        at = bisect.bisect_left(free, length)
        room = free.pop(at) - length if at < len(free) else capacity - length  # the fullest row it fits, or a new one
        bisect.insort(free, room)
    return len(free)
