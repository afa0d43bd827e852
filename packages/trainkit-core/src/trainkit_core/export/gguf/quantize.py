"""K-quant GGUF types (``q4_k_m`` …): llama.cpp's own quantiser, and llama-quantize's type for each tensor.

Why not llama.cpp's ``llama-quantize``: neither `gguf` nor xllamacpp exposes it (its
``llama_model_quantize`` is not in xllamacpp's library), and building llama.cpp from
source takes minutes of a compiler. But xllamacpp's prebuilt library exports ggml's
``ggml_quantize_chunk``, the function llama-quantize itself calls on every tensor. It
is called here through ctypes, so the k-quant blocks in the file are llama.cpp's own
bytes; ``ctypes`` releases the GIL during the call, so rows are quantised on every core.

What llama-quantize adds on top is the *mix*: a ``q4_k_m`` file is not all Q4_K. Which
type each tensor gets (`plan_tensor_types`) is trainkit's reimplementation of
``llama_tensor_get_type`` in llama.cpp's ``src/llama-quant.cpp`` at build 11549 (the
source xllamacpp 2026.10.11549 vendors), for the tensors of the architectures trainkit
exports (Gemma 3's dense language model: no experts, not Falcon, not a 70B), without an
importance matrix. llama-quantize itself never ran here; the rules, followed to the letter:

- the output head, or the token embedding when the head is tied to it, is Q6_K (Q8_0
  when its rows are not a multiple of 256);
- attn_v and ffn_down of some layers get more bits (``use_more_bits``: the first and
  last eighth of the layers and every third between), attn_output too in q2_k/q3_k_*;
- a row length that the chosen type's blocks of 256 do not divide falls back: Q2_K and
  Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, and to F16 when even 32 does
  not divide it;
- one-dimensional tensors (norms) stay F32, as the converter writes them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainkit_core.errors import JobError, UsageError

#: The k-quant file types, as llama-quantize names them (lower case), and the type most tensors get.
K_QUANT_TYPES = {
    "q2_k": "Q2_K",
    "q3_k_s": "Q3_K",
    "q3_k_m": "Q3_K",
    "q3_k_l": "Q3_K",
    "q4_k_s": "Q4_K",
    "q4_k_m": "Q4_K",
    "q5_k_s": "Q5_K",
    "q5_k_m": "Q5_K",
    "q6_k": "Q6_K",
}
#: llama-quantize's i-quant types (importance-matrix era), refused below.
I_QUANT_TYPES = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs", "iq3_xs", "iq3_s", "iq3_m")
#: llama-quantize's types that are not made here, and why.
REFUSED_QUANT_TYPES = {
    "q2_k_s": "needs an importance matrix (llama-imatrix run on text), which trainkit does not compute",
    **dict.fromkeys(
        (*I_QUANT_TYPES, "iq4_nl", "iq4_xs"),
        "an i-quant: trainkit reimplements llama-quantize's type mix for the k-quants only",
    ),
}
#: Where llama-quantize sends a type whose blocks do not divide a row (`tensor_type_fallback`).
FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
QK_K = 256


@dataclass(frozen=True)
class TensorType:
    """The type a tensor is written in, and why it is not the file type's own (None when it is)."""

    type: str
    reason: str | None = None
    #: Whether the type is a fallback, because the chosen type's blocks do not divide the rows.
    fallback: bool = False


def file_type(quant: str) -> int:
    """The GGUF ``general.file_type`` of a k-quant (llama.cpp's ``LLAMA_FTYPE_MOSTLY_*``)."""
    import gguf

    return int(gguf.LlamaFileType[f"MOSTLY_{quant.upper()}"])


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    """llama-quant.cpp's choice of layers that get more bits (C++ integer division; i_layer >= 0)."""
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


def _layer(name: str) -> int:
    found = re.match(r"blk\.(\d+)\.", name)
    return int(found.group(1)) if found else -1


def _category(name: str) -> str:
    """llama-quant.cpp's `tensor_get_category`, for the names trainkit writes."""
    if name == "output.weight":
        return "output"
    if name == "token_embd.weight":
        return "token_embd"
    for part in ("attn_v.weight", "attn_k.weight", "attn_q.weight", "attn_output.weight"):
        if part in name:
            return part.removesuffix(".weight")
    for part in ("ffn_up", "ffn_gate", "ffn_down"):
        if part in name:
            return part
    return "other"


def _mixed_type(quant: str, category: str, columns: int, counters: dict[str, int], n_gqa: int, n_layers: int) -> str:
    """`llama_tensor_get_type_impl` for the k-quant file types, on a dense model that is not Falcon or 70B.

    `counters` holds llama.cpp's running indices of attn_v and ffn_down tensors, the number of
    attn_v tensors, and whether the head is tied to the embedding (no output.weight)."""
    default = K_QUANT_TYPES[quant]
    if category == "output" or (category == "token_embd" and counters["tied"]):
        return "Q8_0" if columns % QK_K else "Q6_K"
    if category == "attn_v":
        i, n = counters["i_attn_v"], counters["n_attn_v"]
        counters["i_attn_v"] += 1
        if quant == "q2_k":
            return "Q4_K" if n_gqa >= 4 else "Q3_K"
        if quant == "q3_k_m":
            return "Q5_K" if i < 2 else "Q4_K"
        if quant == "q3_k_l":
            return "Q5_K"
        if quant in ("q4_k_m", "q5_k_m") and _use_more_bits(i, n):
            return "Q6_K"
        if quant == "q4_k_s" and i < 4:
            return "Q5_K"
        return default
    if category == "ffn_down":
        i, n = counters["i_ffn_down"], n_layers
        counters["i_ffn_down"] += 1
        if quant == "q2_k":
            return "Q3_K"
        if quant == "q3_k_m":
            return "Q5_K" if i < n // 16 else "Q4_K"  # non-Falcon: Q4_K whether or not use_more_bits
        if quant == "q3_k_l":
            return "Q5_K"
        if quant in ("q4_k_m", "q5_k_m") and _use_more_bits(i, n):
            return "Q6_K"
        if quant == "q4_k_s" and i < n // 8:
            return "Q5_K"
        return default
    if category == "attn_output":
        return {"q2_k": "Q3_K", "q3_k_m": "Q4_K", "q3_k_l": "Q5_K"}.get(quant, default)
    return default  # attn_q, attn_k, ffn_gate, ffn_up, an untied token_embd: the file type's own


def _fallback(chosen: str, columns: int) -> TensorType:
    """`tensor_type_fallback`: a type whose blocks do not divide the row, replaced by one whose blocks do."""
    import gguf

    block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[chosen]][0]
    if columns % block == 0:
        return TensorType(chosen)
    to = FALLBACK.get(chosen, chosen)
    if columns % gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[to]][0]:
        to = "F16"
    reason = f"rows of {columns} are not a multiple of {block} ({chosen}): {to}, as llama-quantize does"
    return TensorType(to, reason, fallback=True)


def plan_tensor_types(
    quant: str, shapes: Mapping[str, tuple[int, ...]], *, n_layers: int, n_head: int, n_head_kv: int
) -> dict[str, TensorType]:
    """The type of each tensor (GGUF name → numpy shape, rows last) in a `quant` file, as llama-quantize picks it.

    Visited in llama.cpp's order (layer number, then name), which its running attn_v and
    ffn_down indices depend on."""
    if quant not in K_QUANT_TYPES:
        raise UsageError(f"{quant!r} is not a k-quant type; expected one of {', '.join(K_QUANT_TYPES)}")
    counters = {
        "i_attn_v": 0,
        "n_attn_v": sum(_category(name) == "attn_v" for name in shapes),
        "i_ffn_down": 0,
        "tied": "output.weight" not in shapes,
    }
    n_gqa = n_head // n_head_kv if n_head_kv else 0
    plan: dict[str, TensorType] = {}
    for name in sorted(shapes, key=lambda name: (_layer(name), name)):
        shape = shapes[name]
        # llama-quantize quantises 2-D (and 3-D) tensors named *weight but no norms; the rest keep their type
        if len(shape) < 2 or not name.endswith("weight") or "_norm.weight" in name:
            plan[name] = TensorType("F32")
            continue
        chosen = _mixed_type(quant, _category(name), shape[-1], counters, n_gqa, n_layers)
        planned = _fallback(chosen, shape[-1])
        if planned.reason is None and chosen != K_QUANT_TYPES[quant]:
            role = "token_embd, the tied output head" if name == "token_embd.weight" else _category(name)
            planned = TensorType(chosen, f"{role}: {chosen} in {quant}, as llama-quantize picks it")
        plan[name] = planned
    return plan


def summarise(quant: str, plan: Mapping[str, TensorType]) -> dict[str, Any]:
    """The export record's view of a plan: tensors per type, and the tensors that fell back, grouped by reason."""
    fallbacks: dict[str, list[str]] = {}
    for name, planned in plan.items():
        if planned.fallback and planned.reason:
            fallbacks.setdefault(planned.reason, []).append(name)
    return {
        "file_type": quant,
        "tensor_types": dict(sorted(Counter(planned.type for planned in plan.values()).items())),
        "fallbacks": [{"reason": reason, "tensors": names} for reason, names in fallbacks.items()],
        "type_mix": "trainkit's reimplementation of llama-quantize's rules (llama.cpp build 11549, no imatrix)",
    }


def _library() -> Any:
    """xllamacpp's shared library (llama.cpp and ggml, prebuilt), with ggml's quantiser's signatures declared."""
    import ctypes
    import importlib.util

    try:
        spec = importlib.util.find_spec("xllamacpp.xllamacpp")
    except ImportError:
        spec = None
    if spec is None or not spec.origin:
        raise JobError(
            "k-quant GGUF types are made by llama.cpp's quantiser in the xllamacpp package, which is not installed",
            hint="pip install 'trainkit-core[gguf]' (xllamacpp is a prebuilt wheel of llama.cpp)",
        )
    library = ctypes.CDLL(spec.origin)
    library.ggml_quantize_chunk.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
    ]
    library.ggml_quantize_chunk.restype = ctypes.c_size_t
    library.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    library.ggml_row_size.restype = ctypes.c_size_t
    library.ggml_validate_row_data.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    library.ggml_validate_row_data.restype = ctypes.c_bool
    return library


def quantize(array: Any, type_name: str, *, threads: int | None = None) -> Any:
    """A float matrix (rows × columns) as ggml blocks of `type_name` (Q4_K, Q8_0 …): uint8, one row of bytes per row.

    The bytes are those of llama.cpp's ``ggml_quantize_chunk`` (no importance matrix),
    checked with its ``ggml_validate_row_data`` as llama-quantize checks them."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import gguf
    import numpy as np

    data = np.ascontiguousarray(array, dtype=np.float32)
    if data.ndim != 2:
        raise JobError(f"only matrices are quantised, not a tensor of shape {data.shape}")
    qtype = gguf.GGMLQuantizationType[type_name]
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    rows, columns = data.shape
    if columns % block:  # ggml would abort the process, not raise
        raise JobError(f"rows of {columns} values do not split into {type_name} blocks of {block}")
    library = _library()
    row_bytes = int(library.ggml_row_size(int(qtype), columns))
    if row_bytes != columns // block * block_bytes:
        raise JobError(f"llama.cpp's {type_name} rows are {row_bytes} bytes, the gguf package expects a different size")
    out = np.empty((rows, row_bytes), dtype=np.uint8)
    workers = max(1, min(threads or os.cpu_count() or 1, rows))
    step = -(-rows // workers)

    def chunk(first: int) -> int:
        count = min(step, rows - first)
        source = data.ctypes.data + first * columns * 4
        target = out.ctypes.data + first * row_bytes
        return int(library.ggml_quantize_chunk(int(qtype), source, target, 0, count, columns, None))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        written = sum(pool.map(chunk, range(0, rows, step)))
    if written != out.nbytes or not library.ggml_validate_row_data(int(qtype), out.ctypes.data, out.nbytes):
        raise JobError(f"llama.cpp's quantiser wrote invalid {type_name} data ({written} of {out.nbytes} bytes)")
    return out


def add_tensor(writer: Any, name: str, array: Any, planned: TensorType) -> None:
    """Add one tensor to a `gguf.GGUFWriter` in its planned type."""
    import gguf
    import numpy as np

    if planned.type == "F32":
        writer.add_tensor(name, np.asarray(array, dtype=np.float32))
    elif planned.type == "F16":
        writer.add_tensor(name, np.asarray(array, dtype=np.float16))
    else:
        qtype = gguf.GGMLQuantizationType[planned.type]
        packed = quantize(array, planned.type)
        writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=qtype)
