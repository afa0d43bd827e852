"""K-quant GGUF files (q4_k_m …): llama.cpp's quantiser through xllamacpp, llama-quantize's mix of types.

The type tables below are derived by hand from llama.cpp's ``src/llama-quant.cpp`` at
build 11549 (``llama_tensor_get_type_impl``, ``use_more_bits``, ``tensor_type_fallback``),
not from trainkit's code. Two locally built models: `tiny` (rows of 128 and 256, so
most tensors fall back) and a wider Gemma 3 text model whose rows are multiples of 256,
so real Q2_K … Q6_K blocks are written; those are read back with the `gguf` package's
numpy dequantiser (the byte layout) and the file is run in llama.cpp.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainkit_core.export.gguf.check import release_server

gguf = pytest.importorskip("gguf")
xllamacpp = pytest.importorskip("xllamacpp")

pytestmark = [pytest.mark.ml, pytest.mark.gguf]

#: Layers whose attn_v and ffn_down get more bits in q4_k_m / q5_k_m, for 26 layers (Gemma 3 1b):
#: i < 26/8 = 3, i >= 7*26/8 = 22, or (i - 3) % 3 == 2.
MORE_BITS_26 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 22, 23, 24, 25}


def _gemma3_1b_shapes() -> dict[str, tuple[int, ...]]:
    """Gemma 3 1b's tensors as trainkit writes them (numpy shapes, rows last): hidden 1152, 4 heads of 256, 1 KV
    head, feed-forward 6912, tied embeddings (no output.weight)."""
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (262144, 1152), "output_norm.weight": (1152,)}
    for i in range(26):
        shapes |= {
            f"blk.{i}.attn_q.weight": (1024, 1152),
            f"blk.{i}.attn_k.weight": (256, 1152),
            f"blk.{i}.attn_v.weight": (256, 1152),
            f"blk.{i}.attn_output.weight": (1152, 1024),
            f"blk.{i}.ffn_gate.weight": (6912, 1152),
            f"blk.{i}.ffn_up.weight": (6912, 1152),
            f"blk.{i}.ffn_down.weight": (1152, 6912),
            f"blk.{i}.attn_norm.weight": (1152,),
            f"blk.{i}.attn_q_norm.weight": (256,),
        }
    return shapes


def _types(plan: dict) -> dict[str, str]:
    return {name: planned.type for name, planned in plan.items()}


def test_the_type_mix_follows_llama_quantize_for_gemma_3_1b() -> None:
    from trainkit_core.export.gguf.quantize import plan_tensor_types

    shapes = _gemma3_1b_shapes()
    heads = {"n_layers": 26, "n_head": 4, "n_head_kv": 1}

    got = _types(plan_tensor_types("q4_k_m", shapes, **heads))
    # Rows of 1152 are 4.5 blocks of 256: Q4_K falls back to Q5_0, Q6_K to Q8_0; the tied embedding is the
    # output head, which is Q8_0 when its rows do not split into 256.
    assert got["token_embd.weight"] == "Q8_0" and got["output_norm.weight"] == "F32"
    for i in range(26):
        assert got[f"blk.{i}.attn_q.weight"] == got[f"blk.{i}.ffn_up.weight"] == "Q5_0"
        assert got[f"blk.{i}.attn_v.weight"] == ("Q8_0" if i in MORE_BITS_26 else "Q5_0")
        assert got[f"blk.{i}.attn_output.weight"] == "Q4_K"  # rows of 1024
        assert got[f"blk.{i}.ffn_down.weight"] == ("Q6_K" if i in MORE_BITS_26 else "Q4_K")  # rows of 6912
        assert got[f"blk.{i}.attn_norm.weight"] == "F32"

    got = _types(plan_tensor_types("q3_k_m", shapes, **heads))
    assert [got[f"blk.{i}.attn_v.weight"] for i in range(4)] == ["Q5_1", "Q5_1", "Q5_0", "Q5_0"]  # Q5_K, Q4_K
    assert got["blk.0.ffn_down.weight"] == "Q5_K" and got["blk.1.ffn_down.weight"] == "Q4_K"  # i < 26/16
    assert got["blk.7.attn_output.weight"] == "Q4_K" and got["blk.7.attn_q.weight"] == "Q4_0"  # Q3_K falls back

    got = _types(plan_tensor_types("q4_k_s", shapes, **heads))
    assert [got[f"blk.{i}.attn_v.weight"] for i in range(6)] == ["Q5_1"] * 4 + ["Q5_0"] * 2  # Q5_K for i < 4
    assert [got[f"blk.{i}.ffn_down.weight"] for i in range(5)] == ["Q5_K"] * 3 + ["Q4_K"] * 2  # i < 26/8

    got = _types(plan_tensor_types("q2_k", shapes, **heads))
    assert got["blk.9.attn_v.weight"] == "Q5_0"  # 4 query heads per KV head: Q4_K, falling back
    assert got["blk.9.ffn_down.weight"] == got["blk.9.attn_output.weight"] == "Q3_K"
    assert got["blk.9.ffn_gate.weight"] == "Q4_0"
    two_kv = _types(plan_tensor_types("q2_k", shapes, n_layers=26, n_head=4, n_head_kv=2))
    assert two_kv["blk.9.attn_v.weight"] == "Q4_0"  # n_gqa 2: Q3_K, falling back

    got = _types(plan_tensor_types("q6_k", shapes, **heads))
    assert {got[n] for n in shapes if ".ffn_down" in n or ".attn_output" in n} == {"Q6_K"}
    assert {got[n] for n in shapes if ".attn_q." in n} == {"Q8_0"}


def test_an_untied_head_gets_q6_k_and_rows_that_split_into_256_keep_the_file_type() -> None:
    from trainkit_core.export.gguf.quantize import plan_tensor_types

    shapes = {"token_embd.weight": (1024, 512), "output.weight": (1024, 512), "output_norm.weight": (512,)}
    for i in range(8):
        shapes |= {f"blk.{i}.attn_v.weight": (256, 512), f"blk.{i}.ffn_down.weight": (512, 1024)}
    plan = plan_tensor_types("q5_k_m", shapes, n_layers=8, n_head=8, n_head_kv=2)
    got = _types(plan)
    assert got["output.weight"] == "Q6_K" and got["token_embd.weight"] == "Q5_K"  # untied: the embedding is plain
    # 8 layers: 8/8 = 1, 7*8/8 = 7: layers 0, 3, 6 (every third from 1) and 7 get more bits
    expected = ["Q6_K" if i in (0, 3, 6, 7) else "Q5_K" for i in range(8)]
    assert [got[f"blk.{i}.attn_v.weight"] for i in range(8)] == expected
    assert [got[f"blk.{i}.ffn_down.weight"] for i in range(8)] == expected
    assert not any(planned.fallback for planned in plan.values())
    assert plan["blk.0.attn_v.weight"].reason and plan["blk.1.attn_v.weight"].reason is None


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    from trainkit_core.models.tiny_model import build_tokenizer

    return build_tokenizer(["one two three"])


def _save(folder: Path, tokenizer, **shape: object) -> Path:  # type: ignore[no-untyped-def]
    from trainkit_core.models.tiny_model import build_model

    build_model(tokenizer, **shape).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def _read_types(path: Path) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}


def test_tiny_in_q4_k_m_falls_back_where_its_rows_are_short(tokenizer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA3

    folder = _save(tmp_path / "tiny", tokenizer)
    info = write_gguf(folder, tmp_path / "t.gguf", quant="q4_k_m", fmt=GEMMA3, name="tiny")
    got = _read_types(tmp_path / "t.gguf")
    # tiny: hidden 128 (rows of 128: Q4_K -> Q5_0, Q6_K -> Q8_0), feed-forward 256 (ffn_down's rows: real
    # K-quant blocks), 2 layers (use_more_bits: layer 1 only, as 7*2/8 = 1), an untied head (Q8_0: rows of 128).
    assert got["output.weight"] == "Q8_0" and got["token_embd.weight"] == "Q5_0"
    assert got["blk.0.ffn_down.weight"] == "Q4_K" and got["blk.1.ffn_down.weight"] == "Q6_K"
    assert got["blk.0.attn_v.weight"] == "Q5_0" and got["blk.1.attn_v.weight"] == "Q8_0"
    for i in (0, 1):
        for part in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
            assert got[f"blk.{i}.{part}.weight"] == "Q5_0"
    assert {got[name] for name in got if name.endswith("norm.weight")} == {"F32"}
    mix = info["quantization"]
    assert mix["tensor_types"] == {"F32": 13, "Q4_K": 1, "Q5_0": 12, "Q6_K": 1, "Q8_0": 2}
    reasons = {f["reason"]: f["tensors"] for f in mix["fallbacks"]}
    assert reasons["rows of 128 are not a multiple of 256 (Q6_K): Q8_0, as llama-quantize does"] == [
        "blk.1.attn_v.weight"
    ]
    reader = gguf.GGUFReader(str(tmp_path / "t.gguf"))
    assert reader.fields["general.file_type"].contents() == int(gguf.LlamaFileType.MOSTLY_Q4_K_M)


#: Relative RMS error a b-bit type keeps under 2**(1 - b) on normal weights (measured: about half of it).
BITS = {"Q2_K": 2, "Q3_K": 3, "Q4_K": 4, "Q5_K": 5, "Q6_K": 6, "Q8_0": 8}


@pytest.mark.parametrize(("quant", "types"), [("q4_k_m", {"Q4_K", "Q6_K"}), ("q2_k", {"Q2_K", "Q3_K", "Q4_K", "Q6_K"})])
def test_k_quant_blocks_read_back_as_the_weights_and_run_in_llama_cpp(
    tokenizer, tmp_path: Path, quant: str, types: set[str]
) -> None:  # type: ignore[no-untyped-def]
    import numpy as np
    from safetensors.numpy import load_file

    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA3

    # One KV head for four query heads, as Gemma 3's 1B has: q2_k gives its attn_v Q4_K (llama.cpp's n_gqa >= 4).
    shape = {"hidden_size": 256, "intermediate_size": 512, "head_dim": 64, "num_hidden_layers": 4}
    folder = _save(tmp_path / "wide", tokenizer, **shape, num_key_value_heads=1, tie_word_embeddings=True)
    info = write_gguf(folder, tmp_path / "w.gguf", quant=quant, fmt=GEMMA3, name="wide")
    assert info["quantization"]["fallbacks"] == []
    hf = load_file(str(folder / "model.safetensors"))
    tensors = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "w.gguf")).tensors}
    matrices = {name: t for name, t in tensors.items() if len(t.shape) == 2}
    assert {t.tensor_type.name for t in matrices.values()} == types
    assert matrices["token_embd.weight"].tensor_type.name == "Q6_K"  # tied: the embedding is the output head
    pairs = {
        "token_embd.weight": "model.embed_tokens.weight",
        "blk.3.ffn_down.weight": "model.layers.3.mlp.down_proj.weight",
    }
    pairs |= {f"blk.{i}.attn_v.weight": f"model.layers.{i}.self_attn.v_proj.weight" for i in range(4)}
    pairs |= {"blk.1.attn_output.weight": "model.layers.1.self_attn.o_proj.weight"}
    for name, hf_name in pairs.items():
        tensor, original = matrices[name], hf[hf_name]
        back = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        assert back.shape == original.shape, name
        error = np.sqrt(np.mean((back - original) ** 2)) / original.std()
        assert error < 2.0 ** (1 - BITS[tensor.tensor_type.name]), (name, tensor.tensor_type.name, error)

    params = xllamacpp.CommonParams()
    params.model.path = str(tmp_path / "w.gguf")
    params.n_ctx = 256
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.warmup = False
    params.verbosity = -1
    held = [xllamacpp.Server(params)]
    server = held[0]
    result = server.handle_chat_completions(
        {"messages": [{"role": "user", "content": "one two"}], "max_tokens": 8, "temperature": 0, "top_k": 1}
    )
    del server
    release_server(held)  # its destructor may hang (see release_server)
    assert "error" not in result, result
    assert result["usage"]["prompt_tokens"] > 5 and 1 <= result["usage"]["completion_tokens"] <= 8


def test_quantised_bytes_are_llama_cpps_own_and_bad_requests_are_refused(tmp_path: Path) -> None:
    """On the legacy types the ctypes path and the `gguf` package's reference quantiser agree byte for byte;
    a row that the blocks do not divide is an error (ggml itself would abort the process); a type that needs an
    importance matrix is refused by name."""
    import numpy as np

    from trainkit_core.errors import JobError, UsageError
    from trainkit_core.export.gguf.quantize import quantize
    from trainkit_core.export.gguf.writer import check_gguf_type

    weights = np.random.default_rng(0).standard_normal((8, 512)).astype(np.float32)
    for name in ("Q8_0", "Q4_0", "Q5_1"):
        assert np.array_equal(quantize(weights, name), gguf.quants.quantize(weights, gguf.GGMLQuantizationType[name]))
    assert quantize(weights, "Q4_K").shape == (8, 512 // 256 * 144)
    with pytest.raises(JobError, match="rows of 384 values do not split into Q4_K blocks of 256"):
        quantize(weights[:, :384], "Q4_K")
    with pytest.raises(UsageError, match=r"q2_k_s.*importance matrix"):
        check_gguf_type("q2_k_s")
