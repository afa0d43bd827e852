"""GGUF export of Gemma 4's mixture-of-experts layout (26B A4B: routed experts beside the dense MLP).

The twin `tiny-gemma4-moe` is `tiny-gemma4` with, in every layer, 4 experts 32 wide, 2
routed per token (`trainkit_core.models.twins.gemma4_moe_config`). Transformers holds each
layer's experts as two stacked tensors (``experts.gate_up_proj``, gate rows then up rows, and
``experts.down_proj``), a router (``router.proj``, its input scale ``router.scale`` and the
per-expert weight ``router.per_expert_scale``) and three more norms; llama.cpp (build 11549)
reads them as ``ffn_gate_up_exps``, ``ffn_down_exps``, ``ffn_gate_inp`` with ``.scale`` tensors
beside the last two, ``pre_ffw_norm_2``, ``post_ffw_norm_1`` and ``post_ffw_norm_2``.

One short run is exported in f16 and the export job's own check in llama.cpp must pass. A
second test compares llama.cpp's next-token log-probabilities with transformers' with the
layer scalars and the router's scales drawn at random, and shows that a file whose fused
expert tensor holds the up rows before the gate rows, or whose per-expert weights are left
at 1, is told apart. The k-quants, whose type mix is planned for matrices only, are refused.
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

EXPERTS, ROUTED, EXPERT_WIDTH = 4, 2, 32
HIDDEN = 64


@pytest.fixture(scope="module")
def exported(env: Env, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_and_export(env, "tiny-gemma4-moe", tmp_path_factory, "the vision tower and projector")


def test_the_gemma4_moe_twin_exports_in_f16_and_answers_as_infer(exported: Path) -> None:
    from trainkit_core.models.chat_format import GEMMA4

    checked_export(exported)
    text = json.loads((exported / "config.json").read_text())["text_config"]
    assert text["enable_moe_block"] and (text["num_experts"], text["top_k_experts"]) == (EXPERTS, ROUTED)

    reader = gguf.GGUFReader(str(exported / "model-f16.gguf"))
    fields = {name: field.contents() for name, field in reader.fields.items()}
    assert fields["general.architecture"] == "gemma4" and fields["gemma4.block_count"] == 12
    assert (fields["gemma4.expert_count"], fields["gemma4.expert_used_count"]) == (EXPERTS, ROUTED)
    assert fields["gemma4.expert_feed_forward_length"] == EXPERT_WIDTH
    assert fields["gemma4.feed_forward_length"] == text["intermediate_size"]  # the dense MLP beside the experts
    tokens = fields["tokenizer.ggml.tokens"]
    assert tokens[fields["tokenizer.ggml.eot_token_id"]] == GEMMA4.end_of_turn

    tensors = {t.name: t for t in reader.tensors}
    for i in range(12):
        block = f"blk.{i}."
        # gguf lists a tensor's shape innermost first: each expert's gate and up rows (64 wide) stacked, then experts
        assert list(tensors[block + "ffn_gate_up_exps.weight"].shape) == [HIDDEN, 2 * EXPERT_WIDTH, EXPERTS]
        assert list(tensors[block + "ffn_down_exps.weight"].shape) == [EXPERT_WIDTH, HIDDEN, EXPERTS]
        assert tensors[block + "ffn_gate_up_exps.weight"].tensor_type.name == "F16"
        assert list(tensors[block + "ffn_gate_inp.weight"].shape) == [HIDDEN, EXPERTS]
        assert tensors[block + "ffn_gate_inp.weight"].tensor_type.name == "F32"  # the router is never rounded
        assert list(tensors[block + "ffn_gate_inp.scale"].shape) == [HIDDEN]
        assert list(tensors[block + "ffn_down_exps.scale"].shape) == [EXPERTS]
        for norm in ("ffn_norm", "pre_ffw_norm_2", "post_ffw_norm", "post_ffw_norm_1", "post_ffw_norm_2"):
            assert list(tensors[block + norm + ".weight"].shape) == [HIDDEN]
        assert block + "ffn_gate.weight" in tensors and block + "ffn_down.weight" in tensors  # the dense MLP
    assert not any(name.startswith(("v.", "mm.")) for name in tensors)


def _with_llama_cpp_gelu(model: Any) -> Any:
    """`model` with llama.cpp's GELU (`_tabulated_gelu`) in its experts too, not only in its dense MLPs.

    With transformers' own GELU in the experts the untrained twin's gap was 0.085 (f32, measured
    2026-12-06); with llama.cpp's, 1.2e-4."""
    _tabulated_gelu(model)
    gelu = next(m for m in model.modules() if type(m).__name__ == "Gemma4TextMLP").act_fn
    experts = [m for m in model.modules() if type(m).__name__ == "Gemma4TextExperts"]
    assert experts
    for block in experts:
        block.act_fn = gelu
    return model


def test_the_experts_and_their_router_are_what_llama_cpp_computes(exported: Path, tmp_path: Path) -> None:
    """llama.cpp's next-token log-probabilities against transformers', the layer scalars and router scales random.

    Measured 2026-12-06 (f32, the run trained 40 steps): 2.2e-4 apart; the controls, a fused expert tensor
    with its up rows first (2.1) and the per-expert weights left out (1.2), far off."""
    import torch
    from safetensors.torch import save_file
    from transformers import Gemma4ForConditionalGeneration

    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA4

    folder = tmp_path / "scaled"
    weights = with_random_scalars(exported, folder, scales=("router.scale", "router.per_expert_scale"))

    model = Gemma4ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
    distance = _gaps(folder, _with_llama_cpp_gelu(model))
    write_gguf(folder, tmp_path / "scaled.gguf", quant="f32", fmt=GEMMA4, name="scaled")

    # Controls: what a converter that swapped the fused halves, or dropped the per-expert weights, would write.
    swapped = dict(weights)
    for name in [n for n in weights if n.endswith("experts.gate_up_proj")]:
        gate, up = weights[name].chunk(2, dim=1)
        swapped[name] = torch.cat([up, gate], dim=1).contiguous()
    save_file(swapped, str(folder / "model.safetensors"), metadata={"format": "pt"})
    write_gguf(folder, tmp_path / "swapped.gguf", quant="f32", fmt=GEMMA4, name="swapped")
    unweighted = {n: torch.ones_like(w) if n.endswith("router.per_expert_scale") else w for n, w in weights.items()}
    save_file(unweighted, str(folder / "model.safetensors"), metadata={"format": "pt"})
    write_gguf(folder, tmp_path / "unweighted.gguf", quant="f32", fmt=GEMMA4, name="unweighted")
    distances = {name: distance(tmp_path / f"{name}.gguf") for name in ("scaled", "swapped", "unweighted")}
    assert distances["scaled"] < TOLERANCE, distances
    assert distances["swapped"] > 5 * TOLERANCE and distances["unweighted"] > 5 * TOLERANCE, distances


def test_k_quants_of_the_experts_are_refused_before_the_file_is_written(exported: Path, tmp_path: Path) -> None:
    from trainkit_core.errors import UsageError
    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA4

    with pytest.raises(UsageError, match="q4_k_m of a Gemma 4 with a mixture-of-experts block is not made"):
        write_gguf(exported, tmp_path / "q.gguf", quant="q4_k_m", fmt=GEMMA4, name="q")
    assert not (tmp_path / "q.gguf").exists()
