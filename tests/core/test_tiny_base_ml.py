"""The tiny base is taught to copy when it is built, and every home gets that one build.

What a fine-tune of `tiny` needs from its base (carrying a token from the prompt into the
answer) is measured on the built base itself: spans of ids the lesson never drew, copied
from where they first appeared. The random model it starts from copies nothing. The
build is paid once per machine (`TRAINKIT_TINY_BASE_CACHE`, set by `tests/conftest.py`)
and each home's hf-cache volume gets a copy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.ml


def _ids() -> tuple[int, int]:
    from trainkit_core.models.tiny_model import build_tokenizer, first_plain_id

    tokenizer = build_tokenizer(())
    return first_plain_id(tokenizer), tokenizer.bos_token_id


def test_the_built_base_copies_spans_it_never_saw_and_the_random_one_does_not(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from trainkit_core.models.copying_lesson import copy_accuracy, held_out_batch
    from trainkit_core.models.tiny_model import VOCAB_SIZE, build_model, build_tokenizer, ensure_tiny_base

    first_id, bos = _ids()
    unseen = held_out_batch(first_id, VOCAB_SIZE, bos, seed=20261207)  # the lesson drew seeds 0 and 1
    base = AutoModelForCausalLM.from_pretrained(str(ensure_tiny_base(tmp_path / "hf")), dtype=torch.float32).eval()
    assert copy_accuracy(base, *unseen) >= 0.9
    random_model = build_model(build_tokenizer(())).eval()
    assert copy_accuracy(random_model, *unseen) < 0.1
    info = json.loads((tmp_path / "hf" / "trainkit" / "tiny-gemma" / "v4" / "trainkit_tiny.json").read_text())
    assert info["build_version"] == 4 and info["copying_lesson"]["copy_accuracy"] >= 0.9


def test_every_home_copies_the_one_shared_build(tmp_path: Path) -> None:
    from trainkit_core.models.tiny_model import BUILD_VERSION, ensure_tiny_base

    shared = Path(os.environ["TRAINKIT_TINY_BASE_CACHE"]) / f"v{BUILD_VERSION}"
    first = ensure_tiny_base(tmp_path / "a")
    built = {p.name: p.stat().st_mtime_ns for p in shared.iterdir()}
    second = ensure_tiny_base(tmp_path / "b")
    assert {p.name: p.stat().st_mtime_ns for p in shared.iterdir()} == built  # not built again
    for name in ("model.safetensors", "config.json", "tokenizer.json", "trainkit_tiny.json"):
        assert (first / name).read_bytes() == (shared / name).read_bytes() == (second / name).read_bytes()
    assert not [p for p in first.parent.iterdir() if p.name.startswith(".tmp-")]  # no half-placed folder left


def test_a_lesson_gives_the_same_weights_on_every_build_and_leaves_the_thread_count_alone() -> None:
    import torch

    from trainkit_core.models.copying_lesson import teach_copying
    from trainkit_core.models.tiny_model import VOCAB_SIZE, build_model, build_tokenizer

    first_id, bos = _ids()
    threads = torch.get_num_threads()
    weights = []
    for _ in range(2):
        model = build_model(build_tokenizer(()))
        teach_copying(model, first_id, VOCAB_SIZE, bos, seed=3, steps=15)
        weights.append({k: v.clone() for k, v in model.state_dict().items()})
    assert torch.get_num_threads() == threads
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    untaught = build_model(build_tokenizer(())).state_dict()
    assert not torch.equal(
        untaught["model.layers.0.self_attn.k_proj.weight"], weights[0]["model.layers.0.self_attn.k_proj.weight"]
    )
