"""GGUF export of the Gemma 3 twin (`Gemma3ForConditionalGeneration`): its language model, run in llama.cpp.

The twin has the real 4b/12b's layout at toy size: 8 layers of sliding and full attention,
linear RoPE scaling (x8) on the full layers, tied embeddings, a SigLIP vision tower and a
projector. One short run is exported in f32 (an untrained-ish model has near ties that f16
rounding may flip; tiny's test covers f16) and the export job's own check in llama.cpp must
pass: the answers of `trainkit infer` on the demo's eval prompts, the prompts' tokens, the
chat template in the file. The file holds the language model only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_env import Env

gguf = pytest.importorskip("gguf")
xllamacpp = pytest.importorskip("xllamacpp")

pytestmark = [pytest.mark.ml, pytest.mark.gguf, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def twin_model_path(env: Env) -> str:
    done = env.cli("train", "--dataset", "demo", "--model-size", "tiny-gemma3mm", "--steps", "40")
    found = re.search(r"model: (trained/run-\S+)", done.stdout)
    assert found, done.stdout
    return found.group(1)


def test_the_gemma3_twins_language_model_exports_and_answers_as_infer(
    env: Env, twin_model_path: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = env.cli("export", twin_model_path, "--gguf", "--quant", "f32", "--merged", str(out))
    assert "note: the GGUF holds the language model only: the vision tower and projector" in done.stdout
    info = json.loads((out / "trainkit_export.json").read_text())
    assert info["architectures"] == ["Gemma3ForConditionalGeneration"]
    check = info["gguf"]["check"]
    assert check["passed"] and check["exact_match_rate"] == 1.0, check
    assert check["prompt_tokens_equal"] and check["chat_template_equal"] and check["prompts"] >= 3
    assert "vision tower" in info["gguf"]["left_out"]

    reader = gguf.GGUFReader(str(out / "model-f32.gguf"))
    fields = {name: field.contents() for name, field in reader.fields.items()}
    assert fields["general.architecture"] == "gemma3" and fields["gemma3.block_count"] == 8
    assert fields["gemma3.rope.scaling.type"] == "linear" and fields["gemma3.rope.scaling.factor"] == 8.0
    assert fields["gemma3.attention.sliding_window_pattern"] == [True] * 5 + [False] + [True] * 2
    names = {t.name for t in reader.tensors}
    assert {"token_embd.weight", "output_norm.weight", "blk.7.ffn_down.weight"} <= names
    assert not any(name.startswith(("v.", "mm.")) or "vision" in name for name in names)
    config = json.loads((out / "config.json").read_text())  # the safetensors export keeps the towers
    assert "vision_config" in config
