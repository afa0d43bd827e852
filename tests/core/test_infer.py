"""Inference on the tiny base with real (random, untrained) LoRA adapters.

Loading from `trained_model.json`, generation options, streaming, the shared-base
cache, refusals of models that do not fit, and the infer job in a detached process.
The adapters are built once per module (`trainkit_fake_models`), not trained.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainkit_core.errors import NotFoundError, UsageError

pytestmark = pytest.mark.ml

# Module fixtures import transformers before the autouse fixture sets these.
for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

from trainkit_fake_models import make_fake_model  # noqa: E402


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("infer-home")


@pytest.fixture(scope="module")
def volumes(home: Path) -> tuple[Path, Path]:
    return home / "volumes" / "trainkit-models", home / "volumes" / "trainkit-hf-cache"


@pytest.fixture(scope="module")
def two_models(volumes: tuple[Path, Path]) -> tuple[str, str]:
    models, hf = volumes
    return make_fake_model(models, hf, seed=1), make_fake_model(models, hf, seed=2)


@pytest.fixture(scope="module")
def cache(volumes: tuple[Path, Path], two_models: tuple[str, str]):  # type: ignore[no-untyped-def]
    from trainkit_core.inference.loading import ModelCache

    return ModelCache(*volumes)


def _req(model_path: str, **kw):  # type: ignore[no-untyped-def]
    from trainkit_core.inference.request import GenerateRequest

    return GenerateRequest.parse(
        {"model_path": model_path, "prompt": "Uppercase: snow blue", "max_new_tokens": 12, **kw}
    )


def test_greedy_is_deterministic_and_seeded_sampling_reproducible(cache, two_models) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.inference.generation import generate

    loaded = cache.get(two_models[0])
    a, b = generate(loaded, _req(two_models[0])), generate(loaded, _req(two_models[0]))
    assert a["text"] == b["text"] and a["usage"]["completion_tokens"] == 12 and a["finish_reason"] == "length"
    s1 = generate(loaded, _req(two_models[0], temperature=1.5, top_p=0.9, top_k=20, seed=7))
    s2 = generate(loaded, _req(two_models[0], temperature=1.5, top_p=0.9, top_k=20, seed=7))
    assert s1["text"] == s2["text"]
    assert a["chat_format"] == "gemma3" and a["base_model"] == "trainkit/tiny-gemma"


def test_two_adapters_share_one_base_and_answer_as_if_loaded_alone(cache, two_models, volumes) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.inference.generation import generate
    from trainkit_core.inference.loading import ModelCache

    first, second = (cache.get(p) for p in two_models)
    assert cache.loads == 1 and cache.adapter_loads == 2
    assert first.model is second.model  # one base in memory
    answers = [generate(cache.get(p), _req(p, max_new_tokens=20))["text"] for p in two_models]
    alone = [generate(ModelCache(*volumes).get(p), _req(p, max_new_tokens=20))["text"] for p in two_models]
    assert answers == alone
    assert cache.get(two_models[0]).cached is True


def _logits(loaded):  # type: ignore[no-untyped-def]
    import torch

    ids = loaded.tokenizer("Uppercase: snow blue", add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        loaded.model.set_adapter(loaded.adapter)
        return loaded.model(**ids).logits.clone()


def test_a_model_written_again_is_loaded_again(cache, two_models, volumes) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.inference.loading import ModelCache

    path = make_fake_model(volumes[0], volumes[1], run_id="run-20260102-000000-dddddd", seed=3)
    before = _logits(cache.get(path))
    make_fake_model(volumes[0], volumes[1], run_id="run-20260102-000000-dddddd", seed=4)  # e.g. a resumed run
    again = cache.get(path)
    assert again.cached is False
    after = _logits(again)
    fresh = _logits(ModelCache(*volumes).get(path))
    assert float((after - fresh).abs().max()) < 1e-5
    assert float((after - before).abs().max()) > 1e-3
    assert cache.get(path).cached is True


def test_base_flag_switches_the_adapter_off(cache, two_models, volumes) -> None:  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoModelForCausalLM

    from trainkit_core.inference.generation import generate
    from trainkit_core.models.chat_format import GEMMA3, render_prompt
    from trainkit_core.models.tiny_model import ensure_tiny_base

    loaded = cache.get(two_models[0])
    tuned = generate(loaded, _req(two_models[0], max_new_tokens=20))
    base = generate(loaded, _req(two_models[0], max_new_tokens=20, base=True))
    assert base["base"] is True
    plain = AutoModelForCausalLM.from_pretrained(str(ensure_tiny_base(volumes[1])), dtype=torch.float32).eval()
    ids = loaded.tokenizer(
        render_prompt([{"role": "user", "content": "Uppercase: snow blue"}], GEMMA3),
        add_special_tokens=False,
        return_tensors="pt",
    )
    with torch.inference_mode():
        out = plain.generate(**ids, max_new_tokens=20, do_sample=False, eos_token_id=[-1], pad_token_id=0)
    expected = loaded.tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert base["text"] == expected[: len(base["text"])]
    with torch.inference_mode():
        loaded.model.set_adapter(loaded.adapter)
        tuned_logits = loaded.model(**ids).logits
        base_logits = plain(**ids).logits
    assert float((tuned_logits - base_logits).abs().max()) > 1e-3  # the adapter does something
    assert tuned["text"] != base["text"] or tuned_logits.shape == base_logits.shape


def test_streaming_pieces_add_up_to_the_answer(cache, two_models) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.inference.generation import stream_tokens

    events = list(stream_tokens(cache.get(two_models[1]), _req(two_models[1], max_new_tokens=16)))
    assert events[-1]["type"] == "done"
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) >= 2
    assert "".join(tokens) == events[-1]["text"]


def _copy_model(volumes: tuple[Path, Path], model_path: str, run_id: str, change) -> str:  # type: ignore[no-untyped-def]
    import shutil

    src = volumes[0] / model_path
    dst = volumes[0] / "trained" / run_id
    shutil.copytree(src, dst)
    card = json.loads((dst / "trained_model.json").read_text())
    change(card, dst)
    (dst / "trained_model.json").write_text(json.dumps(card))
    return f"trained/{run_id}"


def test_mismatched_models_are_refused_saying_what_differs(cache, two_models, volumes) -> None:  # type: ignore[no-untyped-def]
    wrong_base = _copy_model(
        volumes, two_models[0], "run-20260101-000000-aaaaaa", lambda c, d: c.update(base_model="google/gemma-3-4b-it")
    )
    with pytest.raises(UsageError, match=r"records base model 'google/gemma-3-4b-it', but its adapter was made on"):
        cache.get(wrong_base)
    unknown_format = _copy_model(
        volumes, two_models[0], "run-20260101-000000-bbbbbb", lambda c, d: c.update(chat_format="chatml")
    )
    with pytest.raises(UsageError, match="unknown chat format 'chatml'"):
        cache.get(unknown_format)

    def strip_markers(card: dict, folder: Path) -> None:  # type: ignore[type-arg]
        tok = json.loads((folder / "tokenizer.json").read_text())
        tok["added_tokens"] = [
            t for t in tok["added_tokens"] if t["content"] not in ("<start_of_turn>", "<end_of_turn>")
        ]
        tok["model"]["vocab"] = {
            k: v for k, v in tok["model"]["vocab"].items() if k not in ("<start_of_turn>", "<end_of_turn>")
        }
        (folder / "tokenizer.json").write_text(json.dumps(tok))
        cfg = json.loads((folder / "tokenizer_config.json").read_text())
        cfg.pop("added_tokens_decoder", None)
        cfg["extra_special_tokens"] = []
        cfg.pop("additional_special_tokens", None)
        (folder / "tokenizer_config.json").write_text(json.dumps(cfg))

    no_markers = _copy_model(volumes, two_models[0], "run-20260101-000000-cccccc", strip_markers)
    with pytest.raises(UsageError, match="has no '<start_of_turn>' token"):
        cache.get(no_markers)
    assert cache.loads == 1  # nothing was loaded for the refused models


def test_missing_and_hostile_models_refused_by_the_cache(cache) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NotFoundError):
        cache.get("trained/run-20990101-000000-abcdef")
    with pytest.raises(UsageError):
        cache.get("trained/../../../etc/passwd")


def test_infer_job_in_a_detached_process(monkeypatch: pytest.MonkeyPatch, home: Path, two_models) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core import get_provider
    from trainkit_core.inference import client

    monkeypatch.setenv("TRAINKIT_HOME", str(home))
    provider = get_provider("local")
    result = client.generate(
        provider,
        {"model_path": two_models[0], "prompt": "Uppercase: snow blue", "max_new_tokens": 12},
        use_server=False,
    )
    assert result["model_path"] == two_models[0] and result["cached"] is False
    assert result["usage"]["completion_tokens"] == 12
    legacy = client.generate(provider, {"model_size": "tiny", "prompt": "hi", "max_new_tokens": 4}, use_server=False)
    assert legacy["model_path"] in two_models or legacy["model_path"].startswith("trained/run-2026")
    events = list(
        client.stream(provider, {"model_path": two_models[0], "prompt": "hi", "max_new_tokens": 4}, use_server=False)
    )
    assert [e["type"] for e in events] == ["token", "done"]


@pytest.mark.parametrize(
    "bad",
    [
        {"prompt": "x"},
        {"model_path": "trained/x", "model_size": "tiny", "prompt": "x"},
        {"model_path": "trained/x"},
        {"model_path": "trained/x", "prompt": "x", "messages": [{"role": "user", "content": "x"}]},
        {"model_path": "trained/x", "messages": [{"role": "assistant", "content": "x"}]},
        {"model_path": "trained/x", "prompt": "x", "temperature": -1},
        {"model_path": "trained/x", "prompt": "x", "top_p": 0},
        {"model_path": "trained/x", "prompt": "x", "max_new_tokens": 0},
        {"model_path": "trained/x", "prompt": "x", "unknown": 1},
    ],
)
def test_bad_requests_refused(bad: dict) -> None:  # type: ignore[type-arg]
    from trainkit_core.inference.request import GenerateRequest

    with pytest.raises(UsageError, match="invalid generation request"):
        GenerateRequest.parse(bad)
