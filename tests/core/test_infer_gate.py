"""The post-training adapter gate: what is served must be what was trained, and must do something.

A random (nonzero) adapter passes; an adapter whose LoRA B is zero (peft's default
initialisation: it changes nothing) is refused as doing nothing; a saved adapter that
differs from the in-memory model is refused as not round-tripping. Each refusal is a
`JobError` carrying the figures, which fails the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.ml

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")


def _setup(trainkit_home: Path, *, init: bool | str):  # type: ignore[no-untyped-def]
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainkit_core.local.plugin import job_context
    from trainkit_core.models.tiny_model import build_tokenizer, ensure_tiny_base
    from trainkit_core.runs.training_run import TrainingRun
    from trainkit_core.settings import Settings

    ctx = job_context(Settings.from_env(), "test")
    base_dir = ensure_tiny_base(ctx.path("hf-cache"))
    tokenizer = build_tokenizer(["Uppercase: snow blue", "SNOW BLUE"])
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=init)
    )
    run = TrainingRun(
        id="run-20261130-120000-abcdef",
        base_model="trainkit/tiny-gemma",
        config={"dataset": "", "model_size": "tiny", "chat_format": "gemma3"},
    )
    out = ctx.path("models") / "trained" / run.id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return ctx, run, model, tokenizer, out


def test_a_working_adapter_passes_with_its_figures(trainkit_home: Path) -> None:
    from trainkit_core.training.post import adapter_gate

    ctx, run, model, tokenizer, out = _setup(trainkit_home, init=False)
    figures, _ = adapter_gate(ctx, run, model, tokenizer, out)
    assert figures["gate_round_trip_max_abs_diff"] <= 1e-4
    assert figures["gate_effect_max_abs_diff"] > 1e-3
    assert figures["gate_reloaded"] == "fresh base"


def test_an_adapter_that_does_nothing_fails_the_gate(trainkit_home: Path) -> None:
    from trainkit_core.errors import JobError
    from trainkit_core.training.post import adapter_gate

    ctx, run, model, tokenizer, out = _setup(trainkit_home, init=True)  # LoRA B = 0
    with pytest.raises(JobError, match=r"changes the base model's logits by at most 0 .* it does nothing"):
        adapter_gate(ctx, run, model, tokenizer, out)
    # What the run found wrong is the reason, and the error carries it.
    with pytest.raises(JobError, match=r"it does nothing; the GRPO reward did not rise: 0.000$"):
        adapter_gate(ctx, run, model, tokenizer, out, why=["the GRPO reward did not rise: 0.000"])


def test_a_saved_adapter_that_is_not_the_trained_one_fails_the_gate(trainkit_home: Path) -> None:
    import torch

    from trainkit_core.errors import JobError
    from trainkit_core.training.post import adapter_gate

    ctx, run, model, tokenizer, out = _setup(trainkit_home, init=False)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.mul_(1.5)  # the in-memory model moved on; the saved files did not
    with pytest.raises(JobError, match=r"logits up to [0-9.e+-]+ away from the trained model's \(tolerance 0.0001\)"):
        adapter_gate(ctx, run, model, tokenizer, out)
