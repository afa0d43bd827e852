"""Builds an untrained-but-real adapter on the tiny base, in seconds, for inference tests.

The LoRA weights are random (`init_lora_weights=False`), so the adapter visibly
changes the base's output; nothing is trained. Needs the training stack.
"""

from __future__ import annotations

from pathlib import Path

from trainkit_core.ids import new_run_id

TEXTS = ["Uppercase: snow blue", "SNOW BLUE", "Hello there, how are you?"]


def make_fake_model(models_root: Path, hf_cache: Path, *, run_id: str | None = None, seed: int = 1) -> str:
    """Write ``trained/<run id>`` (adapter, tokenizer, trained_model.json); returns the model path."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainkit_core.models.chat_format import render
    from trainkit_core.models.tiny_model import TINY_BASE_PATH, build_tokenizer, ensure_tiny_base
    from trainkit_core.models.trained.layout import make_card, write_card

    run_id = run_id or new_run_id()
    base_dir = ensure_tiny_base(hf_cache)
    tokenizer = build_tokenizer([render([{"role": "user", "content": t}], _fmt()) for t in TEXTS])
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    torch.manual_seed(seed)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(base, lora)
    out = Path(models_root) / "trained" / run_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    card = make_card(
        run_id=run_id,
        base_model="trainkit/tiny-gemma",
        base_model_path=TINY_BASE_PATH,
        preset="tiny",
        chat_format="gemma3",
        dataset_id="fake",
        dataset_hash="0" * 64,
        config={"steps": 0},
        backend="hf",
    )
    write_card(out, card)
    return f"trained/{run_id}"


def _fmt():  # type: ignore[no-untyped-def]
    from trainkit_core.models.chat_format import GEMMA3

    return GEMMA3
