"""A prompt is bounded by the model's context, checked before the model runs.

On the tiny base (1024 positions) with a real, random LoRA adapter: a prompt whose tokens
and `max_new_tokens` pass the context is refused with `InputTooLargeError` naming the
bound, before the model sees a token (a forward hook would record it); the CLI exits 2
with that message through the warm worker and through the infer job.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainkit_core.errors import InputTooLargeError

pytestmark = pytest.mark.ml

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

from trainkit_fake_models import make_fake_model  # noqa: E402

CONTEXT = 1024  # the tiny base's max_position_embeddings


def volumes(home: Path) -> tuple[Path, Path]:
    return home / "volumes" / "trainkit-models", home / "volumes" / "trainkit-hf-cache"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from trainkit_core.inference.loading import ModelCache

    models, hf = volumes(tmp_path_factory.mktemp("bounds-home"))
    return ModelCache(models, hf).get(make_fake_model(models, hf))


def prompt_of(loaded, tokens: int) -> str:  # type: ignore[no-untyped-def]
    """A prompt of about `tokens` tokens once rendered."""
    from trainkit_core.models.chat_format import render_prompt

    text = "snow blue " * tokens
    ids = loaded.tokenizer(render_prompt([{"role": "user", "content": text}], loaded.fmt), add_special_tokens=False)
    per_word = len(ids["input_ids"]) / tokens
    return "snow blue " * int(tokens / per_word)


def request(loaded, prompt: str, max_new_tokens: int):  # type: ignore[no-untyped-def]
    from trainkit_core.inference.request import GenerateRequest

    return GenerateRequest.parse({"model_path": loaded.ref.path, "prompt": prompt, "max_new_tokens": max_new_tokens})


def test_the_tiny_base_reads_1024_positions(loaded) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.inference.generation import context_length

    assert context_length(loaded.model) == CONTEXT


def test_a_prompt_past_the_context_is_refused_before_the_model_runs(loaded) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.inference.generation import generate, stream_tokens

    calls: list[int] = []
    hook = loaded.model.get_base_model().register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        for req in (request(loaded, prompt_of(loaded, 3 * CONTEXT), 16), request(loaded, prompt_of(loaded, 1000), 100)):
            with pytest.raises(InputTooLargeError) as caught:
                generate(loaded, req)
            assert f"context of {CONTEXT} tokens" in caught.value.message, caught.value.message
            assert "max_position_embeddings" in caught.value.message and caught.value.http_status == 413
            with pytest.raises(InputTooLargeError):
                list(stream_tokens(loaded, req))
    finally:
        hook.remove()
    assert calls == []  # refused on the token ids: no forward pass, no attention of thousands of tokens


def test_a_prompt_that_fits_with_its_answer_is_answered(loaded) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.inference.generation import generate

    prompt = prompt_of(loaded, 1000)
    result = generate(loaded, request(loaded, prompt, 4))
    assert result["usage"]["prompt_tokens"] + 4 <= CONTEXT
    assert result["usage"]["completion_tokens"] >= 1


@pytest.mark.parametrize("how", [[], ["--stream"], ["--no-warm"]], ids=["warm-worker", "warm-stream", "infer-job"])
def test_the_cli_names_the_context_and_exits_2(trainkit_home: Path, cli_env: dict[str, str], how: list[str]) -> None:
    """The stream too: its error event once lost its type in the worker's answer (and the CLI exited 0)."""
    model = make_fake_model(*volumes(trainkit_home))
    prompt = "snow blue " * 3000  # about 6000 tokens: well past 1024
    args = [sys.executable, "-m", "trainkit_cli", "infer", "--model-path", model, "--prompt", prompt, *how]
    proc = subprocess.run(args, capture_output=True, text=True, env=cli_env, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"context of {CONTEXT} tokens" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
