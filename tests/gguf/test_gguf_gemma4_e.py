"""GGUF export of Gemma 4's E layout (E2B/E4B: per-layer input embeddings, keys and values shared across layers).

The twin `tiny-gemma4-e` is `tiny-gemma4` with per-layer inputs 16 wide, its last 6 of 12
layers reading the keys and values of earlier ones, keys no longer reused as values, and an
audio tower (`trainkit_core.models.twins.gemma4_e_config`). llama.cpp (build 11549) takes a
sharing full layer's keys from the last layer with a cache of its own and a sliding layer's
from the one before it; on E2B (35 layers, the last 20 sharing) those are layer 14, full, and
13, sliding, as transformers has it, and on the twin 5 and 4. A layout where the two rules
part (the twin's earlier build: the last 4 of 12 sharing, its last own layers both sliding;
llama.cpp aborts on it, an assertion in its KV cache) is refused, naming why (the last test).

One short run is exported in f16 and the export job's
own check in llama.cpp must pass: infer's answers, stopping at ``<turn|>``, the prompts' tokens,
the chat template. A second test compares llama.cpp's next-token log-probabilities with
transformers' with the layer scalars drawn at random, and shows that a file whose per-layer
table carries transformers' scale of it (llama.cpp applies it itself) is told apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_env import Env
from test_gguf_gemma4 import TOLERANCE, _gaps, _tabulated_gelu, checked_export, train_and_export, with_random_scalars

gguf = pytest.importorskip("gguf")
xllamacpp = pytest.importorskip("xllamacpp")

pytestmark = [pytest.mark.ml, pytest.mark.gguf, pytest.mark.timeout(1200)]

BASE = "trainkit/tiny-gemma4-e"
#: Layers that read earlier layers' keys and values: E2B's arrangement at the twin's 12 layers.
SHARED = 6
PER_LAYER = 16


@pytest.fixture(scope="module")
def exported(env: Env, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_and_export(env, "tiny-gemma4-e", tmp_path_factory, "the vision and audio towers")


def test_the_gemma4_e_twin_exports_in_f16_and_answers_as_infer(exported: Path) -> None:
    from trainkit_core.models.chat_format import GEMMA4

    checked_export(exported)
    text = json.loads((exported / "config.json").read_text())["text_config"]
    assert (text["hidden_size_per_layer_input"], text["num_kv_shared_layers"]) == (PER_LAYER, SHARED)

    reader = gguf.GGUFReader(str(exported / "model-f16.gguf"))
    fields = {name: field.contents() for name, field in reader.fields.items()}
    assert fields["general.architecture"] == "gemma4" and fields["gemma4.block_count"] == 12
    assert fields["gemma4.embedding_length_per_layer_input"] == PER_LAYER
    assert fields["gemma4.attention.shared_kv_layers"] == SHARED
    sliding = ([True] * 5 + [False]) * 2
    assert fields["gemma4.attention.sliding_window_pattern"] == sliding
    assert fields["gemma4.attention.head_count_kv"] == [2 if s else 1 for s in sliding]  # as the 31B twin
    tokens = fields["tokenizer.ggml.tokens"]
    assert tokens[fields["tokenizer.ggml.eot_token_id"]] == GEMMA4.end_of_turn

    tensors = {t.name: t for t in reader.tensors}
    n_vocab = len(tokens)
    # gguf lists a tensor's shape innermost first: a row per token, the 12 layers' inputs side by side
    assert list(tensors["per_layer_token_embd.weight"].shape) == [12 * PER_LAYER, n_vocab]
    assert list(tensors["per_layer_model_proj.weight"].shape) == [64, 12 * PER_LAYER]
    assert list(tensors["per_layer_proj_norm.weight"].shape) == [PER_LAYER]
    for i in range(12):
        assert list(tensors[f"blk.{i}.inp_gate.weight"].shape) == [64, PER_LAYER]
        assert list(tensors[f"blk.{i}.proj.weight"].shape) == [PER_LAYER, 64]
        assert f"blk.{i}.post_norm.weight" in tensors and f"blk.{i}.layer_output_scale.weight" in tensors
        own = i < 12 - SHARED  # the sharing layers have no keys or values of their own
        assert (f"blk.{i}.attn_k.weight" in tensors, f"blk.{i}.attn_v.weight" in tensors) == (own, own)
        assert (f"blk.{i}.attn_k_norm.weight" in tensors) == own
    assert not any(name.startswith(("v.", "a.", "mm.")) for name in tensors)


def _with_llama_cpp_gelu(model: Any) -> Any:
    """`model` with llama.cpp's GELU (`_tabulated_gelu`) in its MLPs and on its per-layer input gates too.

    With transformers' own GELU on the gates, one draw of the layer scalars in five moved the
    gap to 2.8e-2 (measured 2026-12-06); with llama.cpp's, 7e-4 to 6.4e-3."""
    _tabulated_gelu(model)
    layers = [m for m in model.modules() if type(m).__name__ == "Gemma4TextDecoderLayer"]
    assert layers and all(layer.hidden_size_per_layer_input for layer in layers)
    for layer in layers:
        layer.act_fn = layer.mlp.act_fn
    return model


def test_per_layer_inputs_and_shared_keys_are_what_llama_cpp_computes(exported: Path, tmp_path: Path) -> None:
    """llama.cpp's next-token log-probabilities against transformers', the layer scalars drawn at random.

    Within 7e-4 to 6.4e-3 over five draws (measured 2026-12-06), the sharing layers reading the
    keys and values transformers gives them. The control: a converter that stored the per-layer
    table with transformers' scale of it (sqrt(16): llama.cpp multiplies by it itself) writes a
    file 1.6 to 5.1 off."""

    import torch
    from safetensors.torch import save_file
    from transformers import Gemma4ForConditionalGeneration

    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA4

    folder = tmp_path / "scaled"
    weights = with_random_scalars(exported, folder)

    model = Gemma4ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
    distance = _gaps(folder, _with_llama_cpp_gelu(model))
    write_gguf(folder, tmp_path / "scaled.gguf", quant="f32", fmt=GEMMA4, name="scaled")
    table = next(n for n in weights if n.endswith("embed_tokens_per_layer.weight"))
    weights[table] = weights[table] * PER_LAYER**0.5
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    write_gguf(folder, tmp_path / "twice.gguf", quant="f32", fmt=GEMMA4, name="twice")
    distances = {name: distance(tmp_path / f"{name}.gguf") for name in ("scaled", "twice")}
    assert distances["scaled"] < TOLERANCE and distances["twice"] > 5 * TOLERANCE, distances


def test_the_twins_own_arrangement_of_shared_keys_is_refused_before_the_merge() -> None:
    """The twin's earlier arrangement (4 of 12 sharing): its full sharing layer reads layer 5's keys, which
    llama.cpp takes from layer 7 (sliding); the twin as built now (6 of 12, E2B's) is written."""
    from trainkit_core.errors import UsageError
    from trainkit_core.export.gguf.writer import check_gguf_architecture
    from trainkit_core.models import twins

    twin = twins.TWINS[BASE]
    config = twins.gemma4_e_config(twins.build_tokenizer(twin)).to_dict()
    config["architectures"] = [twin.model_class]
    assert config["text_config"]["num_kv_shared_layers"] == SHARED
    config["text_config"]["num_kv_shared_layers"] = 4
    with pytest.raises(UsageError, match=r"num_kv_shared_layers 4 of 12 layers\) whose full_attention layers read "):
        check_gguf_architecture(config)
    config["text_config"]["num_kv_shared_layers"] = SHARED  # E2B's arrangement: written
    assert check_gguf_architecture(config) == twin.model_class
    config["text_config"]["num_kv_shared_layers"] = 12  # no layer left to hold them
    with pytest.raises(UsageError, match="with no earlier layer to read them from"):
        check_gguf_architecture(config)
    moe = {**config["text_config"], "num_kv_shared_layers": 0, "enable_moe_block": True, "num_experts": 4}
    assert check_gguf_architecture({**config, "text_config": moe}) == twin.model_class  # 26B A4B's: written
