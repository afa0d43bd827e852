"""Gemma 4's layout in a GGUF file (llama.cpp's `gemma4` architecture), beside `gguf_export`'s Gemma 3 one.

Why a layout of its own: Gemma 4 is not a Gemma 3 with other sizes. Its layers differ by
kind (sliding or full attention) in head size, key/value heads and RoPE; its full layers
reuse the keys as values (no ``v_proj``: llama.cpp takes the keys when a layer has no
value matrix); only part of a full layer's head is rotated ("proportional" RoPE); each
layer ends with a learned scalar; its norms multiply by the weight as is (Gemma 3's add
one); and its attention does not scale the scores (the query and key norms do). The
keys and tensor names are the `gguf` package's (``MODEL_ARCH.GEMMA4``), the rules those
of llama.cpp's converter and loader at the pinned build (xllamacpp 2026.10.11549):

- ``attention.key_length`` / ``value_length`` are the full layers' head size, the
  ``_swa`` keys the sliding layers'; ``head_count_kv`` is one value per layer;
- ``rope.dimension_count`` is the whole full-layer head: llama.cpp rotates the first half
  pair by pair (NEOX) and a shared ``rope_freqs`` tensor divides the frequencies of the
  pairs that Gemma leaves unrotated by 1e30 (zero frequency: the identity), which is
  exactly transformers' proportional RoPE (its frequencies are zero past the rotated part);
- ``layer_scalar`` becomes ``blk.N.layer_output_scale.weight``.

The small sizes (E2B/E4B) add two things, written as llama.cpp's converter writes them:

- per-layer input embeddings: ``embedding_length_per_layer_input`` is their width, and the
  tensors (``per_layer_token_embd``, ``per_layer_model_proj``, ``per_layer_proj_norm``, and per
  layer ``inp_gate``, ``proj``, ``post_norm``) are stored as transformers holds them, unscaled:
  llama.cpp's graph applies transformers' scales itself (the table's sqrt of its width, the
  projection's 1/sqrt of the hidden size, 1/sqrt 2 on their sum);
- keys and values shared across layers: ``attention.shared_kv_layers`` counts the last layers
  that read earlier ones' instead of having their own, and those have no key or value
  tensors (transformers builds none). llama.cpp picks the layer they read by position, not
  as transformers does by kind, so a layout where the two differ is refused
  (`check_shared_kv_layers`); E2B's and E4B's agree.

The mixture-of-experts layout (26B A4B: ``enable_moe_block``) adds, in every layer, routed
experts beside the dense MLP, written as llama.cpp's loader (build 11549) reads them (its converter
was not read here: the names are the `gguf` package's and llama.cpp's graph source, and that build
refuses a file with a tensor missing or one too many):

- ``expert_count``, ``expert_used_count`` (``top_k_experts``) and ``expert_feed_forward_length``
  (``moe_intermediate_size``); ``feed_forward_length`` stays the dense MLP's;
- the experts as transformers stacks them, unchanged: ``experts.gate_up_proj`` (per expert, the
  gate rows then the up rows) as ``ffn_gate_up_exps``, ``experts.down_proj`` as ``ffn_down_exps``;
- the router: ``router.proj`` as ``ffn_gate_inp`` (in f32 whatever the type, so that rounding
  cannot route a token elsewhere), its input scale ``router.scale`` as
  ``ffn_gate_inp.scale`` and the per-expert weights ``router.per_expert_scale`` as
  ``ffn_down_exps.scale``; llama.cpp's graph applies its own unweighted norm and 1/sqrt of the
  hidden size, softmax, top-k and renormalisation, as transformers does;
- the extra norms ``pre_feedforward_layernorm_2`` (before the experts), ``post_feedforward_layernorm_1``
  (after the dense MLP) and ``_2`` (after the experts) as ``pre_ffw_norm_2``, ``post_ffw_norm_1``
  and ``post_ffw_norm_2``.

Its k-quants are refused (`check_gemma4_quant`): trainkit's mix is planned for matrices, not the
stacked experts. The block types (q8_0 … q4_0) quantise the experts row by row and are written,
but only f16 (the export's check) and f32 (log-probabilities) were tested; q8_0 was loaded by hand once.

What no trainkit preset has and no twin exercises is refused with its reason rather than
written unverified: double-wide MLPs, attention biases, RoPE scaling, bidirectional attention
over all tokens, and per-layer input embeddings whose table has other rows than the vocabulary.
The multimodal towers (vision, and E2B/E4B's audio) are left out, as for Gemma 3. No heavy
imports at module level.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.export.gguf.quantize import K_QUANT_TYPES

GEMMA4_ARCHITECTURES = ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM")
#: The frequency divisor of a pair Gemma 4 leaves unrotated (llama.cpp's converter uses the same).
UNROTATED = 1e30


def _refuse(what: str) -> UsageError:
    return UsageError(
        f"GGUF export of this Gemma 4 is not supported: it has {what}, which trainkit's converter does not write "
        "(only the layouts of google/gemma-4-31B-it, of E2B/E4B and of 26B A4B are converted, verified in "
        "llama.cpp on twins); "
        "export safetensors"
    )


def check_gemma4_config(config: dict[str, Any]) -> None:
    """Refuse a Gemma 4 text config (a config.json's dict) with a feature this layout does not write.

    Torch-free, so that the export job refuses before it merges; the heads of each layer, which
    only transformers resolves, are checked by `gemma4_layers` when the file is written."""
    rows = config.get("vocab_size_per_layer_input")
    if config.get("hidden_size_per_layer_input") and rows is not None and rows != config.get("vocab_size"):
        raise _refuse(
            f"per-layer input embeddings for {rows} tokens of {config.get('vocab_size')} "
            "(vocab_size_per_layer_input; llama.cpp reads one row per token of the vocabulary)"
        )
    check_shared_kv_layers(config)
    if config.get("use_double_wide_mlp"):
        raise _refuse("double-wide MLPs (use_double_wide_mlp)")
    if config.get("attention_bias"):
        raise _refuse("attention biases (attention_bias)")
    if config.get("attn_logit_softcapping"):
        raise _refuse("attention logit soft-capping (attn_logit_softcapping)")
    # "vision" (the 31B's, probably) makes only image tokens attend both ways; the file gets text only
    if config.get("use_bidirectional_attention") == "all":
        raise _refuse("bidirectional attention over all tokens (use_bidirectional_attention='all')")
    unknown = set(config.get("layer_types") or []) - {"sliding_attention", "full_attention"}
    if unknown:
        raise _refuse(f"layer types {sorted(unknown)}")
    rope = config.get("rope_parameters") or {}
    local, full = rope.get("sliding_attention") or {}, rope.get("full_attention") or {}
    if local.get("rope_type", "default") != "default" or local.get("factor", 1.0) != 1.0:
        raise _refuse(f"{local.get('rope_type')} RoPE on its sliding layers")
    if full.get("rope_type", "default") not in ("default", "proportional") or full.get("factor", 1.0) != 1.0:
        raise _refuse(f"{full.get('rope_type')} RoPE (factor {full.get('factor', 1.0)}) on its full layers")


def check_gemma4_quant(config: dict[str, Any], quant: str) -> None:
    """Refuse a k-quant of the mixture-of-experts layout: trainkit's k-quant mix (llama-quantize's rules,
    `trainkit_core.export.gguf.quantize`) plans matrices only, not the experts' stacked tensors, and no
    mix for them was measured against llama-quantize's."""
    if config.get("enable_moe_block") and quant in K_QUANT_TYPES:
        raise UsageError(
            f"GGUF type {quant} of a Gemma 4 with a mixture-of-experts block is not made by trainkit: its k-quant "
            "mix is planned for matrices, not the experts' stacked tensors; export f16 (or q8_0 ... q4_0) and run "
            "llama.cpp's llama-quantize on it"
        )


def check_shared_kv_layers(config: dict[str, Any]) -> None:
    """Refuse keys and values shared across layers where llama.cpp would read another layer's than transformers.

    Transformers lets each of the last ``num_kv_shared_layers`` layers attend over the keys and
    values of the last earlier layer of its own kind. llama.cpp (build 11549) fixes the source by
    position instead: the layer just before the first sharing one for full layers, the one before
    that for sliding layers. The two agree on E2B and E4B (their last own-cache layer is full,
    the one before it sliding). Where they differ, llama.cpp reads another layer's keys, or aborts
    the process loading the file when that layer is of the other kind (measured: an assertion in
    its ``llama-kv-cache.cpp``), so such a layout is refused."""
    shared = int(config.get("num_kv_shared_layers") or 0)
    if not shared:
        return
    kinds = list(config.get("layer_types") or [])
    first = len(kinds) - shared
    what = f"keys and values shared across layers (num_kv_shared_layers {shared} of {len(kinds)} layers)"
    if first < 1:
        raise _refuse(f"{what}, with no earlier layer to read them from")
    for kind in sorted(set(kinds[first:])):
        own = [i for i in range(first) if kinds[i] == kind]
        llama_cpp = first - 2 if kind == "sliding_attention" else first - 1
        if not own or own[-1] != llama_cpp:
            raise _refuse(
                f"{what} whose {kind} layers read layer {own[-1] if own else None}'s; llama.cpp would read layer "
                f"{llama_cpp}'s (it takes the last layer with a cache of its own for full layers, the one before it "
                "for sliding layers, as in E2B and E4B)"
            )


@dataclass(frozen=True)
class Gemma4Layers:
    """What the `gemma4` keys say of the layers: which slide, and each kind's head size and key/value heads."""

    sliding: tuple[bool, ...]
    heads: int
    local_head: int
    local_kv: int
    full_head: int
    full_kv: int


def gemma4_layers(folder: Path) -> Gemma4Layers:
    """The layers of the Gemma 4 in `folder`, as transformers resolves its config.

    Resolved by transformers, not read from config.json: a checkpoint states the full layers'
    head size as ``global_head_dim`` (512 when absent) and key/value heads as
    ``num_global_key_value_heads``, a config saved by transformers 5.24 as per-layer overrides
    (``per_layer_config``); both mean what the model class builds. llama.cpp knows one head
    size and head count per kind of layer, so a model whose layers differ otherwise is refused."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder)).get_text_config()
    kinds: dict[bool, set[tuple[int, int, int]]] = {True: set(), False: set()}
    sliding = tuple(t == "sliding_attention" for t in config.layer_types)
    for i, is_sliding in enumerate(sliding):
        layer = config.per_layer_config[i]
        kinds[is_sliding].add((int(layer.num_attention_heads), int(layer.head_dim), int(layer.num_key_value_heads)))
    if len(kinds[True]) > 1 or len(kinds[False]) != 1 or len({h for h, _, _ in kinds[True] | kinds[False]}) != 1:
        raise _refuse(f"layers of one kind with different heads ({sorted(kinds[True] | kinds[False])})")
    (_, full_head, full_kv) = next(iter(kinds[False]))
    (heads, local_head, local_kv) = next(iter(kinds[True] or kinds[False]))
    return Gemma4Layers(sliding, heads, local_head, local_kv, full_head, full_kv)


def rope_frequency_factors(config: dict[str, Any], layers: Gemma4Layers) -> list[float]:
    """The full layers' `rope_freqs`: 1 for each rotated pair of the head, `UNROTATED` for the rest."""
    full = (config.get("rope_parameters") or {}).get("full_attention") or {}
    fraction = float(full.get("partial_rotary_factor", 1.0)) if full.get("rope_type") == "proportional" else 1.0
    rotated = int(fraction * layers.full_head // 2)  # as transformers' proportional RoPE counts its rotated pairs
    return [1.0] * rotated + [UNROTATED] * (layers.full_head // 2 - rotated)


def write_gemma4_parameters(writer: Any, config: dict[str, Any], layers: Gemma4Layers) -> None:
    """The `gemma4` architecture's keys of a (checked) Gemma 4 text config."""
    check_gemma4_config(config)
    rope = config.get("rope_parameters") or {}
    writer.add_context_length(int(config.get("max_position_embeddings", 131072)))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_block_count(len(layers.sliding))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(layers.heads)
    writer.add_head_count_kv([layers.local_kv if s else layers.full_kv for s in layers.sliding])
    writer.add_key_length(layers.full_head)
    writer.add_value_length(layers.full_head)
    writer.add_key_length_swa(layers.local_head)
    writer.add_value_length_swa(layers.local_head)
    writer.add_rope_dimension_count(layers.full_head)
    writer.add_rope_dimension_count_swa(layers.local_head)
    writer.add_rope_freq_base(float((rope.get("full_attention") or {}).get("rope_theta", 1_000_000.0)))
    writer.add_rope_freq_base_swa(float((rope.get("sliding_attention") or {}).get("rope_theta", 10_000.0)))
    writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
    writer.add_sliding_window(int(config["sliding_window"]))
    writer.add_sliding_window_pattern(list(layers.sliding))
    writer.add_shared_kv_layers(int(config.get("num_kv_shared_layers") or 0))
    writer.add_embedding_length_per_layer_input(int(config.get("hidden_size_per_layer_input") or 0))
    if config.get("final_logit_softcapping"):
        writer.add_final_logit_softcapping(float(config["final_logit_softcapping"]))
    if config.get("enable_moe_block"):
        writer.add_expert_count(int(config["num_experts"]))
        writer.add_expert_used_count(int(config["top_k_experts"]))
        writer.add_expert_feed_forward_length(int(config["moe_intermediate_size"]))


#: The router's matrix, written in f32 whatever the type: rounding its scores could route a token
#: to other experts than transformers does.
ROUTER_SUFFIX = ".ffn_gate_inp.weight"
#: Gemma 4 tensors under the name `gguf`'s tensor map knows them by, as the end of their name.
#: The layer scalar and the experts have no ``.weight``; the router's two scales are no tensor of
#: the map's but a ``.scale`` beside one (llama.cpp's ``ffn_gate_inp.scale``, ``ffn_down_exps.scale``).
_GGUF_SUFFIXES = {
    "layer_scalar": "layer_scalar.weight",
    "experts.gate_up_proj": "experts.gate_up_proj.weight",
    "experts.down_proj": "experts.down_proj.weight",
    "router.scale": "router.proj.scale",
    "router.per_expert_scale": "experts.down_proj.scale",
}


def gemma4_tensor_name(hf_name: str) -> str:
    """The name `gguf`'s tensor map (with suffixes ``.weight``, ``.bias``, ``.scale``) knows a Gemma 4 tensor by."""
    for end, name in _GGUF_SUFFIXES.items():
        if hf_name.endswith("." + end):
            return hf_name[: -len(end)] + name
    return hf_name
