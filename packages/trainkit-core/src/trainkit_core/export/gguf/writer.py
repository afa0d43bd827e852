"""GGUF files of a merged export, for llama.cpp, Ollama and LM Studio, and the Ollama `Modelfile`.

Why a converter here rather than llama.cpp's ``convert_hf_to_gguf.py``: that script is
not on PyPI (only in llama.cpp's source tree), and for Gemma 3 it drops
``query_pre_attn_scalar`` (llama.cpp's graph scales queries by ``1/sqrt(head_dim)``
for every size but 27b), so a model whose scalar differs from its head size (``tiny``:
256 against 32) would load and answer differently. The file is written with the GGUF
writer, key names and tensor naming of llama.cpp's own Python package (`gguf` on PyPI),
following the converter's Gemma 3 rules: RMSNorm weights are stored as ``1 + w``
(llama.cpp multiplies by the weight as is), the vocabulary is padded to the embedding
rows, and the query scalar is folded into the query norm (exact: the norm precedes
RoPE, which is linear, and the attention scores are linear in the queries).

Types: ``f32``, ``f16`` (matrices in half precision, norms in f32, as llama.cpp's own
converter does), and ``q8_0``, ``q5_1``, ``q5_0``, ``q4_1``, ``q4_0`` (every matrix in
blocks of 32, quantised by the `gguf` package's numpy code, which follows llama.cpp's
reference quantisers; norms stay f32), and the k-quants ``q2_k`` … ``q6_k`` (``q4_k_m`` …),
whose blocks llama.cpp's own quantiser makes and whose mix of types per tensor follows
llama-quantize's rules (`trainkit_core.export.gguf.quantize`).

Which models: Gemma 3 text models (``Gemma3ForCausalLM``: ``tiny``) and the language
model of the multimodal Gemma 3 (``Gemma3ForConditionalGeneration``: 4b/12b and their
twin), with the linear RoPE scaling of its full-attention layers; its vision tower and
projector are not in the file (llama.cpp would read them from a separate ``mmproj``
file, which is not written here). Gemma 4 (``Gemma4ForConditionalGeneration``: 31b and its
twin, E2B/E4B's layout with per-layer inputs and shared keys and values, 26B A4B's with its
experts, and ``Gemma4ForCausalLM``) in llama.cpp's ``gemma4`` layout, its language model likewise
(`trainkit_core.export.gguf.gemma4`, which refuses the Gemma 4 features it does not write).
Tokenizers: byte-level BPE (the `tiny` model's and the twins') as llama.cpp's ``gpt2``
tokenizer, and the real Gemma 3 and 4 checkpoints' SentencePiece-style BPE as its
``llama`` (SPM) tokenizer with scores derived from the merges (see `_vocabulary`); others
are refused rather than written wrongly. No heavy imports at module level.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.export.gguf import quantize as gguf_quantize
from trainkit_core.export.gguf.gemma4 import (
    GEMMA4_ARCHITECTURES,
    ROUTER_SUFFIX,
    check_gemma4_config,
    check_gemma4_quant,
    gemma4_layers,
    gemma4_tensor_name,
    rope_frequency_factors,
    write_gemma4_parameters,
)
from trainkit_core.export.gguf.quantize import K_QUANT_TYPES, REFUSED_QUANT_TYPES
from trainkit_core.models.chat_format import ChatFormat

#: The GGUF types an export may be written in, here (no llama.cpp binary needed).
GGUF_TYPES = ("f32", "f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", *K_QUANT_TYPES)
#: The block-quantised ones among them (blocks of 32 values along a row).
BLOCK_TYPES = ("q8_0", "q5_1", "q5_0", "q4_1", "q4_0")
SUPPORTED_ARCHITECTURES = ("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", *GEMMA4_ARCHITECTURES)
#: Where the language model's tensors sit in a multimodal checkpoint, and the text model's names for them.
TEXT_PREFIXES = {
    "language_model.model.": "model.",
    "model.language_model.": "model.",
    "language_model.lm_head.": "lm_head.",
}
#: The multimodal towers, which the GGUF file leaves out (llama.cpp reads them from an `mmproj` file).
TOWER_PREFIXES = (
    "vision_tower.",
    "multi_modal_projector.",
    "model.vision_tower.",
    "model.multi_modal_projector.",
    "model.embed_vision.",  # Gemma 4's projector
    "model.audio_tower.",
    "model.embed_audio.",
)
MODELFILE = "Modelfile"


def gguf_file_name(quant: str) -> str:
    return f"model-{quant}.gguf"


def check_gguf_type(quant: object) -> str:
    """The checked GGUF type of an export request (text only)."""
    if quant in GGUF_TYPES:
        return str(quant)
    if isinstance(quant, str) and quant.lower() in REFUSED_QUANT_TYPES:
        raise UsageError(
            f"GGUF type {quant!r} is not made by trainkit: {REFUSED_QUANT_TYPES[quant.lower()]}; "
            f"export one of {', '.join(GGUF_TYPES)}, or f16 and run llama.cpp's llama-quantize on it"
        )
    raise UsageError(f"unknown GGUF type {quant!r}; expected one of {', '.join(GGUF_TYPES)}")


def check_gguf_architecture(config: dict[str, Any], quant: str | None = None) -> str:
    """The architecture of a merged model's config.json, refused when no GGUF conversion is built for it
    (or, given `quant`, none of that type)."""
    names = config.get("architectures") or []
    name = names[0] if names else "<none>"
    if name not in SUPPORTED_ARCHITECTURES:
        raise UsageError(
            f"GGUF export of {name} is not supported: only {', '.join(SUPPORTED_ARCHITECTURES)} "
            "(Gemma 3 and Gemma 4, the language model of the multimodal ones) are converted and verified; "
            "export safetensors"
        )
    if name in GEMMA4_ARCHITECTURES:
        check_gemma4_config(text_config(config))
        if quant is not None:
            check_gemma4_quant(text_config(config), quant)
    return str(name)


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config.json: `text_config` in a multimodal one."""
    return config.get("text_config") or config  # type: ignore[no-any-return]


def language_model_tensors(tensors: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The language model's tensors under the text model's names, and the towers' tensors left out."""
    text, towers = {}, []
    for name, tensor in tensors.items():
        if name.startswith(TOWER_PREFIXES):
            towers.append(name)
            continue
        prefix = next((p for p in TEXT_PREFIXES if name.startswith(p)), None)
        text[TEXT_PREFIXES[prefix] + name[len(prefix) :] if prefix else name] = tensor
    return text, towers


def plain_chat_template(fmt: ChatFormat) -> str:
    """The chat format's template of plain conversations, the file's default.

    Not the tool-aware template saved with the tokenizer: `chat_template.text_chat_template` says why.
    """
    from trainkit_core.models.chat_template import text_chat_template

    return text_chat_template(fmt)


def tool_use_chat_template(fmt: ChatFormat) -> str:
    """The tool-aware template saved with the tokenizer, for the file's ``tool_use`` slot.

    llama.cpp renders a request that declares tools with a model's ``tool_use`` template and
    every other request with its default, so a GGUF carries both: plain chats keep the plain
    template its checks prove, and a conversation with tools, calls and their answers is
    rendered as trainkit trained it. Without the `{% generation %}` markers: only
    transformers knows them, and llama.cpp's and Ollama's template engines reject them.
    """
    from trainkit_core.models.chat_template import chat_template

    return chat_template(fmt).replace("{% generation %}", "").replace("{% endgeneration %}", "")


def _tensor_rows(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    tensors: dict[str, Any] = {}
    for file in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(str(file)))
    return tensors


def _sentencepiece_style(data: dict[str, Any]) -> bool:
    """Whether a `tokenizer.json` is a SentencePiece-style BPE as Gemma's (``▁`` for spaces, byte fallback)."""
    decoders = (data.get("decoder") or {}).get("decoders") or [data.get("decoder") or {}]
    return bool(data["model"].get("byte_fallback")) and any(d.get("type") == "ByteFallback" for d in decoders)


def _check_sentencepiece_pipeline(data: dict[str, Any], folder: Path) -> None:
    """Refuse what llama.cpp's SPM tokenizer does differently: it only turns spaces into ``▁`` (no prefix
    space for Gemma 3) and merges across the whole text, so the HF side must do just that too."""
    normalizer = data.get("normalizer") or {}
    pre = data.get("pre_tokenizer")
    replace = normalizer.get("type") == "Replace" and normalizer.get("content") == "\u2581"
    replace = replace and (normalizer.get("pattern") or {}).get("String") == " "
    whole_text = pre is None or (pre.get("type") == "Split" and (pre.get("pattern") or {}).get("String") == " ")
    metaspace = normalizer == {} and (pre or {}).get("type") == "Metaspace"
    metaspace = metaspace and (pre or {}).get("prepend_scheme") == "never" and not (pre or {}).get("split", True)
    if not ((replace and whole_text) or metaspace):
        raise UsageError(
            f"GGUF export reads SentencePiece-style tokenizers as Gemma 3's only (spaces replaced by \u2581, no "
            f"prefix space, no split into words); {folder / 'tokenizer.json'} has normalizer "
            f"{normalizer.get('type')} and pre-tokenizer {(pre or {}).get('type')}, which llama.cpp would "
            "tokenize differently"
        )


def _merges(model: dict[str, Any]) -> list[tuple[str, str]]:
    pairs = []
    for merge in model.get("merges", []):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        pairs.append((left, right))
    return pairs


def _vocabulary(folder: Path, n_vocab: int) -> dict[str, Any]:
    """The GGUF vocabulary of a `tokenizer.json`: `model` (llama.cpp's tokenizer), `tokens`, `types`,
    `merges` (byte-level BPE) or `scores` (SentencePiece-style), and the special ids.

    A SentencePiece-style BPE (Gemma's) is written as llama.cpp reads Gemma's: its SPM tokenizer
    repeatedly joins the adjacent pair whose joined piece has the highest score. The scores are
    minus the rank of the first merge that makes a piece, so its order of joins is the HF BPE's
    (whose merges, converted from SentencePiece, are ranked by the piece's score; every split of a
    piece is a merge). The scores are derived from `tokenizer.json`, not read from a
    ``tokenizer.model``: the HF tokenizer is the one trainkit trains and answers with, a merged
    export need not carry the SentencePiece file, and reading it would need the `sentencepiece`
    package. (llama.cpp's converter, given a tokenizer.json alone, scores every piece alike, -1000:
    its tokenizer then joins the leftmost pair first, which is not the HF order.) Pieces no merge
    makes (characters, bytes) get the lowest score, as they are never joined; added tokens 0, as
    llama.cpp's converter gives control pieces."""
    import gguf

    data = json.loads((folder / "tokenizer.json").read_text())
    model = data["model"]
    decoder = (data.get("decoder") or {}).get("type")
    spm = model.get("type") == "BPE" and _sentencepiece_style(data)
    if model.get("type") != "BPE" or not (spm or decoder == "ByteLevel"):
        raise UsageError(
            f"GGUF export reads byte-level BPE tokenizers (tiny's, the twins') and SentencePiece-style BPE ones "
            f"(Gemma 3's: byte fallback, \u2581 for spaces); {folder} has a {model.get('type')} one decoded by "
            f"{decoder}"
        )
    if spm:
        _check_sentencepiece_pipeline(data, folder)
    by_id = {int(i): tok for tok, i in model["vocab"].items()}
    added_types = {}
    for added in data.get("added_tokens", []):
        by_id[int(added["id"])] = added["content"]
        added_types[int(added["id"])] = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
    if max(by_id) >= n_vocab:
        raise UsageError(f"the tokenizer of {folder} has ids up to {max(by_id)}, beyond the model's {n_vocab} rows")
    merges = _merges(model)
    first_rank: dict[str, int] = {}
    for rank, (left, right) in enumerate(merges):
        first_rank.setdefault(left + right, rank)
    unk = model.get("unk_token")
    tokens, types, scores = [], [], []
    for i in range(n_vocab):
        token = by_id.get(i, f"[PAD{i}]")
        tokens.append(token)
        if i not in by_id:
            kind, score = gguf.TokenType.UNUSED, -10000.0  # llama.cpp's converter's padding score
        elif spm and token == unk:  # an added special token in tokenizer.json, but llama.cpp's unknown piece
            kind, score = gguf.TokenType.UNKNOWN, 0.0
        elif i in added_types:
            kind, score = added_types[i], 0.0
        elif spm and re.fullmatch(r"<0x[0-9A-F]{2}>", token):
            kind, score = gguf.TokenType.BYTE, 0.0
        else:
            kind, score = gguf.TokenType.NORMAL, -float(first_rank.get(token, len(merges)))
        if not spm and kind not in (gguf.TokenType.UNUSED, gguf.TokenType.CONTROL):
            kind = gguf.TokenType.NORMAL  # as before: byte-level BPE pieces are all normal but the special ones
        types.append(int(kind))
        scores.append(score)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    ids = {tok: i for i, tok in enumerate(tokens)}
    special = {
        kind: ids[config[f"{kind}_token"]]
        for kind in ("bos", "eos", "pad", "unk")
        if config.get(f"{kind}_token") in ids
    }
    vocabulary: dict[str, Any] = {"tokens": tokens, "types": types, "special": special}
    if spm:
        return {**vocabulary, "model": "llama", "scores": scores}
    return {**vocabulary, "model": "gpt2", "merges": [f"{left} {right}" for left, right in merges]}


def _write_gemma3_parameters(writer: Any, config: dict[str, Any]) -> None:
    """The `gemma3` architecture's keys of a Gemma 3 text config."""
    import gguf

    head_dim = int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])
    writer.add_context_length(int(config.get("max_position_embeddings", 131072)))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_block_count(int(config["num_hidden_layers"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(int(config["num_attention_heads"]))
    writer.add_head_count_kv(int(config["num_key_value_heads"]))
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
    rope = config.get("rope_parameters") or {}
    full = rope.get("full_attention", rope) if isinstance(rope, dict) else {}
    local = rope.get("sliding_attention", {}) if isinstance(rope, dict) else {}
    writer.add_rope_freq_base(float(full.get("rope_theta") or config.get("rope_theta") or 1_000_000.0))
    # Gemma 3 4b/12b scale the positions of their full-attention layers linearly; llama.cpp
    # applies a file's scaling to those layers only (its sliding layers keep scale 1).
    scaling = full if full.get("rope_type") not in (None, "default") else (config.get("rope_scaling") or {})
    if scaling.get("rope_type", "default") == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(float(scaling["factor"]))
    elif scaling.get("rope_type", "default") != "default" or local.get("rope_type", "default") != "default":
        raise UsageError(f"GGUF export of a Gemma 3 with {scaling.get('rope_type')} RoPE scaling is not built")
    layer_types = config.get("layer_types") or []
    if config.get("sliding_window") and layer_types:
        writer.add_sliding_window(int(config["sliding_window"]))
        writer.add_sliding_window_pattern([t == "sliding_attention" for t in layer_types])
        writer.add_rope_freq_base_swa(float(local.get("rope_theta") or config.get("rope_local_base_freq") or 10_000.0))
    if config.get("final_logit_softcapping"):
        writer.add_final_logit_softcapping(float(config["final_logit_softcapping"]))


def write_gguf(folder: Path, dest: Path, *, quant: str, fmt: ChatFormat, name: str) -> dict[str, Any]:
    """Write the merged model in `folder` (config, safetensors, tokenizer) as one GGUF file `dest`."""
    import gguf
    import numpy as np
    import torch

    quant = check_gguf_type(quant)
    full_config = json.loads((folder / "config.json").read_text())
    gemma4 = check_gguf_architecture(full_config) in GEMMA4_ARCHITECTURES
    config = text_config(full_config)
    arch = gguf.MODEL_ARCH.GEMMA4 if gemma4 else gguf.MODEL_ARCH.GEMMA3
    layers = gemma4_layers(folder) if gemma4 else None
    if gemma4:
        check_gemma4_quant(config, quant)
    n_layers = int(config["num_hidden_layers"])
    head_dim = int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])
    # Gemma 4 has no query scalar (its scores are not scaled), Gemma 3's is folded into the query norm
    query_scale = 1.0 if gemma4 else (head_dim / float(config.get("query_pre_attn_scalar") or head_dim)) ** 0.5
    tensors, towers = language_model_tensors(_tensor_rows(folder))
    n_vocab = int(tensors["model.embed_tokens.weight"].shape[0])
    vocabulary = _vocabulary(folder, n_vocab)
    eot_id = vocabulary["tokens"].index(fmt.end_of_turn)
    file_type = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "q5_1": gguf.LlamaFileType.MOSTLY_Q5_1,
        "q5_0": gguf.LlamaFileType.MOSTLY_Q5_0,
        "q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
        "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
        **{k_quant: gguf_quantize.file_type(k_quant) for k_quant in K_QUANT_TYPES},
    }[quant]
    if quant in BLOCK_TYPES:  # before the file is opened: a row that does not split into blocks cannot be stored
        uneven = [name for name, t in tensors.items() if t.ndim >= 2 and t.shape[-1] % 32]
        if uneven:
            raise UsageError(f"GGUF type {quant} stores rows in blocks of 32; these rows are not: {', '.join(uneven)}")

    writer = gguf.GGUFWriter(str(dest), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name(name)
    writer.add_file_type(int(file_type))
    if layers is not None:
        write_gemma4_parameters(writer, config, layers)
    else:
        _write_gemma3_parameters(writer, config)
    writer.add_tokenizer_model(vocabulary["model"])
    writer.add_token_list(vocabulary["tokens"])
    writer.add_token_types(vocabulary["types"])
    if vocabulary["model"] == "llama":  # llama.cpp's SPM tokenizer, as Gemma's own GGUFs
        writer.add_tokenizer_pre("default")
        writer.add_token_scores(vocabulary["scores"])
        writer.add_add_space_prefix(False)  # Gemma 3's tokenizer adds no space before the text
    else:
        writer.add_tokenizer_pre("gpt-2")
        writer.add_token_merges(vocabulary["merges"])
    for kind, token_id in vocabulary["special"].items():
        getattr(writer, f"add_{kind}_token_id")(token_id)
    writer.add_eot_token_id(eot_id)
    writer.add_add_bos_token(False)  # trainkit's prompts (and the chat template) carry <bos> themselves
    writer.add_add_eos_token(False)
    writer.add_chat_template(
        [
            {"name": "default", "template": plain_chat_template(fmt)},
            {"name": "tool_use", "template": tool_use_chat_template(fmt)},
        ]
    )

    names = gguf.get_tensor_name_map(arch, n_layers)

    def gguf_name(hf_name: str) -> str | None:
        if gemma4:
            return names.get_name(gemma4_tensor_name(hf_name), try_suffixes=(".weight", ".bias", ".scale"))
        return names.get_name(hf_name, try_suffixes=(".weight", ".bias"))

    plan = None
    if quant in K_QUANT_TYPES:  # llama-quantize's type for each tensor, decided on the whole model's shapes
        shapes = {gguf_name(n) or n: tuple(t.shape) for n, t in tensors.items()}
        heads = (int(config["num_attention_heads"]), int(config["num_key_value_heads"]))
        plan = gguf_quantize.plan_tensor_types(quant, shapes, n_layers=n_layers, n_head=heads[0], n_head_kv=heads[1])
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    if layers is not None:  # the full layers' partial rotation, a tensor of its own in llama.cpp
        rope_freqs = torch.tensor(rope_frequency_factors(config, layers), dtype=torch.float32)
        writer.add_tensor(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight", rope_freqs.numpy())
    for hf_name, tensor in tensors.items():
        data = tensor.to(torch.float32)
        if hf_name.endswith("norm.weight") and not gemma4:
            data = data + 1.0  # Gemma 3's RMSNorm multiplies by (1 + w), Gemma 4's by w
            if hf_name.endswith("self_attn.q_norm.weight"):
                data = data * query_scale
        new_name = gguf_name(hf_name)
        if new_name is None:
            raise UsageError(f"no GGUF name for tensor {hf_name!r} of {folder}")
        array = data.numpy()
        if array.ndim == 1 or quant == "f32" or new_name.endswith(ROUTER_SUFFIX):
            writer.add_tensor(new_name, array.astype(np.float32))
        elif quant == "f16":
            writer.add_tensor(new_name, array.astype(np.float16))
        elif plan is not None:
            gguf_quantize.add_tensor(writer, new_name, array, plan[new_name])
        else:
            block_type = gguf.GGMLQuantizationType[quant.upper()]
            packed = gguf.quants.quantize(array, block_type)
            writer.add_tensor(new_name, packed, raw_shape=packed.shape, raw_dtype=block_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    info: dict[str, Any] = {
        "file": dest.name,
        "type": quant,
        "end_of_turn_id": eot_id,
        "n_vocab": n_vocab,
        "query_scale": query_scale,
    }
    if plan is not None:
        info["quantization"] = gguf_quantize.summarise(quant, plan)
    if towers:
        audio = any(name.startswith(("model.audio_tower.", "model.embed_audio.")) for name in towers)
        what = "the vision and audio towers and their projectors" if audio else "the vision tower and projector"
        info["left_out"] = (
            f"the language model only: {what} ({len(towers)} tensors) are not in the file, "
            "so llama.cpp, Ollama and LM Studio run it as a text model"
        )
    return info


def modelfile_text(gguf_name: str, fmt: ChatFormat, *, eos: str | None = "<eos>") -> str:
    """An Ollama `Modelfile`: the GGUF beside it, the chat format as a Go template, its stops, greedy."""
    ts, eot = fmt.turn_start, fmt.end_of_turn
    template = (
        "{{- if .System }}" + f"{ts}user\n" + "{{ .System }}\n\n{{ .Prompt }}" + f"{eot}\n"
        "{{- else if .Prompt }}" + f"{ts}user\n" + "{{ .Prompt }}" + f"{eot}\n" + "{{- end }}"
        f"{ts}{fmt.model_role}\n" + "{{ .Response }}" + f"{eot}\n"
    )
    stops = [eot] + ([eos] if eos else [])
    lines = [f"FROM ./{gguf_name}", f'TEMPLATE """{template}"""']
    lines += [f'PARAMETER stop "{stop}"' for stop in stops]
    lines += ["PARAMETER temperature 0", "PARAMETER num_ctx 1024"]
    return "\n".join(lines) + "\n"


def parse_modelfile(text: str) -> dict[str, Any]:
    """The instructions of a Modelfile: `from`, `template` and `parameters` (name → list of values).

    Strict about what it writes: an unknown instruction or an unterminated \"\"\" block is an error."""
    result: dict[str, Any] = {"from": None, "template": None, "parameters": {}}
    pattern = re.compile(
        r'(FROM|TEMPLATE|PARAMETER|SYSTEM|LICENSE|ADAPTER|MESSAGE)\s+("""(.*?)"""|[^\n]*)', re.S | re.I
    )
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        match = pattern.match(text, pos)
        if match is None:
            raise UsageError(f"Modelfile: cannot read line {text.count(chr(10), 0, pos) + 1}: {text[pos : pos + 40]!r}")
        if match.group(3) is None and match.group(2).startswith('"""'):
            raise UsageError(f'Modelfile: unterminated """ block at line {text.count(chr(10), 0, pos) + 1}')
        word, value = match.group(1).upper(), match.group(3) if match.group(3) is not None else match.group(2).strip()
        if word == "PARAMETER":
            key, _, raw = value.partition(" ")
            result["parameters"].setdefault(key, []).append(json.loads(raw) if raw.startswith('"') else raw)
        elif word in ("FROM", "TEMPLATE"):
            result[word.lower()] = value
        pos = match.end()
    return result
