"""The GGUF converter on a freshly built tiny model, read back with the `gguf` package (no llama.cpp)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

pytestmark = [pytest.mark.ml, pytest.mark.gguf]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from trainkit_core.models.tiny_model import build_model, build_tokenizer

    folder = tmp_path_factory.mktemp("tiny")
    tokenizer = build_tokenizer(["one two three"])
    build_model(tokenizer).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def _tensors(path: Path) -> dict[str, object]:
    reader = gguf.GGUFReader(str(path))
    return {t.name: t for t in reader.tensors}


def test_f32_file_holds_the_weights_with_gemmas_norm_and_query_scale_folded_in(
    tiny_folder: Path, tmp_path: Path
) -> None:
    import numpy as np
    from safetensors.numpy import load_file

    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA3

    info = write_gguf(tiny_folder, tmp_path / "m.gguf", quant="f32", fmt=GEMMA3, name="tiny")
    config = json.loads((tiny_folder / "config.json").read_text())
    hf = load_file(str(tiny_folder / "model.safetensors"))
    got = _tensors(tmp_path / "m.gguf")
    assert len(got) == len(hf)
    scale = (config["head_dim"] / config["query_pre_attn_scalar"]) ** 0.5
    assert info["query_scale"] == pytest.approx(scale) and scale != 1.0  # tiny: 256 against 32
    np.testing.assert_array_equal(got["token_embd.weight"].data, hf["model.embed_tokens.weight"])
    np.testing.assert_array_equal(got["output.weight"].data, hf["lm_head.weight"])  # untied head kept
    np.testing.assert_allclose(got["blk.1.attn_norm.weight"].data, hf["model.layers.1.input_layernorm.weight"] + 1)
    np.testing.assert_allclose(
        got["blk.0.attn_q_norm.weight"].data, (hf["model.layers.0.self_attn.q_norm.weight"] + 1) * scale, rtol=1e-6
    )
    np.testing.assert_allclose(got["blk.0.attn_k_norm.weight"].data, hf["model.layers.0.self_attn.k_norm.weight"] + 1)
    reader = gguf.GGUFReader(str(tmp_path / "m.gguf"))
    fields = {name: field.contents() for name, field in reader.fields.items()}
    assert fields["gemma3.attention.sliding_window_pattern"] == [True, True]  # both tiny layers are local
    assert len(fields["tokenizer.ggml.tokens"]) == config["vocab_size"]


@pytest.mark.parametrize(("quant", "bits"), [("q8_0", 8), ("q5_1", 5), ("q4_0", 4)])
def test_a_block_quantised_file_quantises_the_matrices_only(
    tiny_folder: Path, tmp_path: Path, quant: str, bits: int
) -> None:
    import numpy as np
    from safetensors.numpy import load_file

    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA3

    write_gguf(tiny_folder, tmp_path / "q.gguf", quant=quant, fmt=GEMMA3, name="tiny")
    got = _tensors(tmp_path / "q.gguf")
    hf = load_file(str(tiny_folder / "model.safetensors"))
    block_type = gguf.GGMLQuantizationType[quant.upper()]
    assert got["blk.0.ffn_down.weight"].tensor_type == block_type
    assert got["output_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    reader = gguf.GGUFReader(str(tmp_path / "q.gguf"))
    file_type = reader.fields["general.file_type"].contents()
    assert file_type == int(getattr(gguf.LlamaFileType, f"MOSTLY_{quant.upper()}"))
    back = gguf.quants.dequantize(got["blk.0.ffn_down.weight"].data, block_type)
    original = hf["model.layers.0.mlp.down_proj.weight"]
    # Each block of 32 keeps its largest value to about one step of 2**bits levels.
    assert back.shape == original.shape and np.abs(back - original).max() < np.abs(original).max() * 2 ** (2 - bits)


def test_a_tokenizer_llama_cpp_would_read_differently_is_refused_not_written_wrongly(
    tiny_folder: Path, tmp_path: Path
) -> None:
    """SentencePiece-style vocabularies are written for llama.cpp's SPM tokenizer as Gemma 3's
    (tests/gguf/test_gguf_sentencepiece.py); one with a prefix space (Gemma 1/2's, Llama's ``Prepend``
    normaliser) or a decoder that is neither would tokenize differently there, so it is refused, naming
    the file, before anything is written."""
    import shutil

    from trainkit_core.errors import UsageError
    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA3

    folder = tmp_path / "spm"
    shutil.copytree(tiny_folder, folder)
    data = json.loads((folder / "tokenizer.json").read_text())
    data["model"]["byte_fallback"] = True
    data["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]}
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    data["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, replace]}
    data["pre_tokenizer"] = None
    (folder / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"as Gemma 3's only .*spm/tokenizer.json has normalizer Sequence"):
        write_gguf(folder, tmp_path / "x.gguf", quant="f16", fmt=GEMMA3, name="spm")
    assert not (tmp_path / "x.gguf").exists()

    data["model"]["byte_fallback"] = False
    data["decoder"] = {"type": "Metaspace"}
    (folder / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"byte-level BPE tokenizers .* decoded by Metaspace"):
        write_gguf(folder, tmp_path / "x.gguf", quant="f16", fmt=GEMMA3, name="spm")
    assert not (tmp_path / "x.gguf").exists()


def test_rows_that_blocks_of_32_do_not_divide_are_refused_before_a_file_is_written(tmp_path: Path) -> None:
    """A legacy block type cannot store a row of 48 (ggml would abort the process); the k-quants fall back
    to f16 there, as llama-quantize does."""
    from trainkit_core.errors import UsageError
    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA3
    from trainkit_core.models.tiny_model import build_model, build_tokenizer

    folder = tmp_path / "narrow"
    tokenizer = build_tokenizer(["one two three"])
    build_model(tokenizer, hidden_size=48).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    for quant in ("q8_0", "q4_0"):
        dest = tmp_path / f"{quant}.gguf"
        with pytest.raises(UsageError, match=f"GGUF type {quant} stores rows in blocks of 32") as refused:
            write_gguf(folder, dest, quant=quant, fmt=GEMMA3, name="narrow")
        assert "model.layers.0.self_attn.q_proj.weight" in refused.value.message
        assert not dest.exists()

    info = write_gguf(folder, tmp_path / "k.gguf", quant="q4_k_m", fmt=GEMMA3, name="narrow")
    types = {name: t.tensor_type.name for name, t in _tensors(tmp_path / "k.gguf").items()}
    assert types["blk.0.attn_q.weight"] == "F16" and "F16" in info["quantization"]["tensor_types"]
