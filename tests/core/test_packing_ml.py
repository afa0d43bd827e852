"""Padding-free packing (`--packing`) on the tiny model: each example keeps its loss.

The proof that packed examples neither see each other nor get wrong positions: a packed
batch, as the trainer's own dataloader builds it, gives each example the loss it has alone
(a forward pass of that example by itself), and the trainer's loss over the packed batch is
the mean over all labelled tokens of the examples alone. The same row without its
position ids (plain concatenation) gives other losses, so the comparison can fail.
Also: the assistant-only labels inside a packed row, refusals, the plan's count of packed
rows against trl's packing, and a `--packing` run of tiny that learns the demo.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.ml

REPO = Path(__file__).resolve().parents[2]


def _conversations() -> list[list[dict[str, str]]]:
    """Examples of mixed lengths and turns: demo opposites, a system prompt, a two-answer conversation."""
    demo = [json.loads(line)["messages"] for line in (REPO / "datasets/demo/train.jsonl").read_text().splitlines()[:6]]
    two_turns = [
        {"role": "system", "content": "Answer with opposites."},
        *demo[0],
        {"role": "user", "content": demo[1][0]["content"] + " " + demo[2][0]["content"]},
        {"role": "assistant", "content": demo[1][1]["content"] + " " + demo[2][1]["content"]},
    ]
    return [*demo, two_turns, [{"role": "system", "content": "Be brief."}, *demo[3]]]


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A packing trainer of the tiny model (hf backend) over the examples, with its first packed batch."""
    from trainkit_core.models.chat_format import encode_for_training, get_format, render
    from trainkit_core.models.tiny_model import build_tokenizer, ensure_tiny_base
    from trainkit_core.training.backends import build_trainer, load_hf
    from trainkit_core.training.config import TrainConfig

    work = tmp_path_factory.mktemp("packing")
    fmt = get_format("gemma3")
    conversations = _conversations()
    tokenizer = build_tokenizer([render(c, fmt) for c in conversations], fmt.name)
    # A batch of 2 rows of 64 tokens: several examples in each, more than one row in the batch.
    config = TrainConfig(dataset="demo", steps=1, packing=True, batch_size=2, max_seq_length=64).resolve()
    model = load_hf(str(ensure_tiny_base(work / "hf")), config)
    rows = [encode_for_training(tokenizer, c, fmt, max_length=config.max_seq_length) for c in conversations]
    trainer = build_trainer("hf", model, tokenizer, rows, config, work / "out", [])
    batch = next(iter(trainer.get_train_dataloader()))
    return trainer, tokenizer, rows, {k: v.to("cpu") if hasattr(v, "to") else v for k, v in batch.items()}


def _segments(batch: dict[str, Any]) -> list[tuple[int, int]]:
    """(start, end) of each example in the packed row, from the position ids restarting at 0."""
    positions = batch["position_ids"][0].tolist()
    starts = [i for i, p in enumerate(positions) if p == 0]
    return list(zip(starts, [*starts[1:], len(positions)], strict=True))


def _row_of(rows: list[dict[str, list[int]]], ids: list[int]) -> dict[str, list[int]]:
    matches = [row for row in rows if row["input_ids"] == ids]
    assert matches, "a packed segment is no example's tokens"
    return matches[0]


def _token_losses(model: Any, **inputs: Any) -> Any:
    import torch

    logits = model(**inputs, use_cache=False).logits[0, :-1].float()
    labels = inputs["input_ids"][0, 1:]
    return torch.nn.functional.cross_entropy(logits, labels, reduction="none")


def test_the_batch_is_one_padding_free_row_of_several_examples(packed: Any) -> None:
    trainer, _, rows, batch = packed
    assert "attention_mask" not in batch  # with a mask, transformers would not look for packed examples
    assert batch["input_ids"].shape[0] == 1
    segments = _segments(batch)
    assert 2 < len(segments) <= len(rows)
    for start, end in segments:
        assert batch["position_ids"][0, start:end].tolist() == list(range(end - start))
    assert sum(end - start for start, end in segments) <= 2 * trainer.args.max_length


def test_each_example_has_its_own_loss_in_a_packed_row(packed: Any) -> None:
    import torch

    trainer, _, rows, batch = packed
    model = trainer.model
    model.eval()
    with torch.no_grad():
        labels = batch["labels"][0]
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        logits = model(**inputs, use_cache=False).logits[0, :-1].float()
        per_token = torch.nn.functional.cross_entropy(logits, labels[1:], ignore_index=-100, reduction="none")
        plain = _token_losses(model, input_ids=batch["input_ids"])  # no position ids: one long sequence
        total, count, differs = 0.0, 0, 0
        for start, end in _segments(batch):
            row = _row_of(rows, batch["input_ids"][0, start:end].tolist())
            alone_labels = torch.tensor(row["labels"][1:])
            alone_logits = model(input_ids=torch.tensor([row["input_ids"]]), use_cache=False).logits[0, :-1].float()
            alone = torch.nn.functional.cross_entropy(alone_logits, alone_labels, ignore_index=-100, reduction="sum")
            in_row = per_token[start : end - 1].sum()  # the token before `end` predicts the next example's start
            assert float(in_row) == pytest.approx(float(alone), rel=1e-5, abs=1e-5)
            mask = alone_labels != -100
            differs += start > 0 and abs(float(plain[start : end - 1][mask].sum() - alone)) > 1e-3
            total += float(alone)
            count += int(mask.sum())
        assert differs  # the comparison sees attention across examples when there is some
        loss = trainer.compute_loss(model, dict(batch))
    assert float(loss) == pytest.approx(total / count, rel=1e-5)


def test_the_assistant_only_mask_is_kept_in_a_packed_row(packed: Any) -> None:
    _, tokenizer, rows, batch = packed
    labels = batch["labels"][0].tolist()
    answers = []
    for start, end in _segments(batch):
        row = _row_of(rows, batch["input_ids"][0, start:end].tolist())
        # Exactly the example's own labels; its first token's (never a target alone) is masked.
        assert labels[start:end] == [-100, *row["labels"][1:]]
        answers.append(tokenizer.decode([t for t in labels[start:end] if t != -100]))
    assert any("<end_of_turn>" in a for a in answers)
    for answer in answers:  # answers only: no user turn, no prompt, no role marker
        assert "Opposites" not in answer and "user" not in answer and "model" not in answer


def test_packing_is_refused_where_examples_would_see_each_other(packed: Any) -> None:
    from trainkit_core.errors import JobError
    from trainkit_core.training.packing import check_model

    trainer, _, _, _ = packed
    model = trainer.model
    check_model(model, "hf", None)  # the tiny model on sdpa: accepted
    with pytest.raises(JobError, match="image datasets"):
        check_model(model, "hf", data_collator=object())
    with pytest.raises(JobError, match="hf backend only"):
        check_model(model, "unsloth", None)
    config = model.config
    attention, model_type = config._attn_implementation, config.model_type
    try:
        config._attn_implementation = "paged|sdpa"
        with pytest.raises(JobError, match="'paged\\|sdpa', whose examples would attend to each other"):
            check_model(model, "hf", None)
        config._attn_implementation = attention
        config.model_type = "llama"
        with pytest.raises(JobError, match="not on 'llama'"):
            check_model(model, "hf", None)
    finally:
        config._attn_implementation, config.model_type = attention, model_type


def test_the_plan_counts_the_rows_trl_packs() -> None:
    import random

    from trl.data_utils import pack_dataset

    from datasets import Dataset  # type: ignore[attr-defined]
    from trainkit_core.training.packing import packed_rows

    rng = random.Random(7)
    for capacity in (16, 64, 256):
        lengths = [rng.randint(1, capacity) for _ in range(300)]
        dataset = Dataset.from_dict({"input_ids": [[1] * n for n in lengths]})
        assert packed_rows(lengths, capacity) == len(pack_dataset(dataset, capacity, "bfd"))


@pytest.mark.timeout(900)
def test_a_packing_run_of_tiny_learns_the_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny preset's recipe with two packed rows of 256 tokens a step (about 24 demo examples; the preset's
    batch is 16). One row (about 12 examples) learnt every word but the first on the copying base of tiny build 4
    (final loss 0.78, exact match 0.03-0.05 over two seeds; build 3: 0.8): too few examples a step at its rate."""
    import sys

    from trainkit_core import get_provider
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings
    from trainkit_core.training.submit import start_run

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import methods_demo as demo

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    settings = Settings(
        provider=ProviderSettings(home=tmp_path / "home"), datasets=DatasetSettings(datasets_dir=tmp_path / "datasets")
    )
    local = get_provider("local", settings)
    run = start_run(local, {"dataset": "demo", "packing": True, "batch_size": 2}).wait(timeout=840)
    assert run.status == "succeeded", run.error
    assert run.config["packing"] is True
    assert run.metrics["final_loss"] < run.metrics["first_loss"] / 4
    answers = demo.answers(local, f"trained/{run.id}", demo.EVAL_PROMPTS)
    right = sum(got.strip() == want for got, (_, want) in zip(answers, demo.EVAL, strict=True)) / len(demo.EVAL)
    # Measured 1.0 (the base model: 0); a margin for other thread counts and library versions.
    assert right >= 0.6, list(zip(answers, demo.EVAL, strict=True))[:5]
