"""The hf backend's CPU loss against trl's fused head: the same loss and gradients on the twins' real batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.ml

TWINS = {"trainkit/tiny-gemma3mm": ("tiny-gemma3mm", "gemma3"), "trainkit/tiny-gemma4": ("tiny-gemma4", "gemma4")}

EXAMPLES = [
    {
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": [{"type": "text", "text": "What is in the picture?"}, {"type": "image_url", "image_url": {"url": "RED"}}]},
            {"role": "assistant", "content": "a red square"},
            {"role": "user", "content": "And its colour?"},
            {"role": "assistant", "content": "red"},
        ]
    },
    {"messages": [{"role": "user", "content": "no picture here"}, {"role": "assistant", "content": "ok, none at all"}]},
]  # fmt: skip


@pytest.fixture(scope="module", params=list(TWINS), ids=[fmt for _, fmt in TWINS.values()])
def trainer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from PIL import Image

    from trainkit_core.datasets.vision_collator import VisionCollator
    from trainkit_core.models.chat_format import get_format
    from trainkit_core.models.processors import load_processor
    from trainkit_core.models.twins import ensure_twin_base
    from trainkit_core.training.backends import build_trainer, load_hf
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.vision import with_vision_modules

    size, fmt = TWINS[request.param]
    work = tmp_path_factory.mktemp("loss")
    Image.new("RGB", (48, 40), "red").save(work / "red.png")
    folder = ensure_twin_base(request.param, work / "hf")
    config = TrainConfig(dataset="shapes", model_size=size, steps=1).resolve()
    config = with_vision_modules(config, str(folder), "hf", images=True)
    processor = load_processor(folder)
    if processor.tokenizer.pad_token is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    collator = VisionCollator(processor, get_format(fmt), max_length=config.max_seq_length)
    model = load_hf(str(folder), config)
    rows = [{"record": json.dumps(example).replace('"RED"', json.dumps(str(work / "red.png")))} for example in EXAMPLES]
    built = build_trainer("hf", model, processor.tokenizer, rows, config, Path(work / "out"), [], collator)
    built.batch = collator(rows)
    return built


def loss_and_grads(trainer: Any, compute_loss: Any, batch: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    trainer.model.zero_grad()
    loss = compute_loss(trainer.model, dict(batch), num_items_in_batch=None)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return loss.item(), grads


def test_the_cpu_loss_is_trls_loss_with_the_same_gradients(trainer: Any) -> None:
    from trl import SFTTrainer

    ours, our_grads = loss_and_grads(trainer, trainer.compute_loss, trainer.batch)
    entropies = len(trainer._metrics["train"]["entropy"])
    fused, fused_grads = loss_and_grads(
        trainer, lambda *a, **k: SFTTrainer.compute_loss(trainer, *a, **k), trainer.batch
    )
    assert len(trainer._metrics["train"]["entropy"]) == entropies + 1  # trl's own path ran
    assert 0.5 < ours == pytest.approx(fused, rel=1e-5)
    assert our_grads.keys() == fused_grads.keys() and any("vision" in name for name in our_grads)
    # Relative to each gradient's norm (Gemma 3's zero projector gets 1e8), with a floor for the
    # random towers' query and key weights, whose gradients are float32 noise (1e-6, against 0.1-20).
    for name, grad in our_grads.items():
        assert (grad - fused_grads[name]).norm() <= 1e-4 * fused_grads[name].norm() + 1e-5, name


def test_the_cpu_loss_of_a_batch_without_labels_is_a_finite_zero(trainer: Any) -> None:
    batch = {**trainer.batch, "labels": trainer.batch["labels"].clone().fill_(-100)}
    loss, grads = loss_and_grads(trainer, trainer.compute_loss, batch)
    assert loss == 0.0
    assert all(g.abs().max() == 0 for n, g in grads.items() if "lm_head" in n)


def test_large_logits_stay_with_trls_tiles(trainer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Logits over the bound (a real vocabulary on the CPU) are never held whole: trl's path takes them."""
    from trainkit_core.training import backends

    before = len(trainer._metrics["train"]["entropy"])
    trainer.compute_loss(trainer.model, dict(trainer.batch))
    assert len(trainer._metrics["train"]["entropy"]) == before
    monkeypatch.setattr(backends, "SMALL_LOGITS", trainer.batch["labels"].numel() * 10)
    trainer.compute_loss(trainer.model, dict(trainer.batch))
    assert len(trainer._metrics["train"]["entropy"]) == before + 1
