"""The Ollama Modelfile and the GGUF request checks (torch-free; the file itself: tests/gguf)."""

from __future__ import annotations

import re

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.export.gguf.writer import (
    check_gguf_architecture,
    check_gguf_type,
    modelfile_text,
    parse_modelfile,
    plain_chat_template,
)
from trainkit_core.models.chat_format import GEMMA3, GEMMA4, ChatFormat, render_prompt


def _render_go_template(template: str, system: str, prompt: str, response: str) -> str:
    """The subset of Go's text/template the Modelfile uses, evaluated as Ollama would."""
    text = template
    branch = re.compile(r"\{\{- if \.System \}\}(.*?)\{\{- else if \.Prompt \}\}(.*?)\{\{- end \}\}", re.S)
    match = branch.search(text)
    assert match, template
    chosen = match.group(1) if system else match.group(2)
    text = text[: match.start()] + chosen + text[match.end() :]
    return text.replace("{{ .System }}", system).replace("{{ .Prompt }}", prompt).replace("{{ .Response }}", response)


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_modelfile_holds_the_chat_formats_template_and_stop_tokens(fmt: ChatFormat) -> None:
    parsed = parse_modelfile(modelfile_text("model-f16.gguf", fmt))
    assert parsed["from"] == "./model-f16.gguf"
    assert parsed["parameters"]["stop"] == [fmt.end_of_turn, "<eos>"]
    assert parsed["parameters"]["temperature"] == ["0"]
    # The template renders the same turns as trainkit's prompt (Ollama adds <bos> itself from the GGUF).
    for system in ("", "Be brief."):
        messages = [{"role": "user", "content": "hi there"}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        expected = render_prompt(messages, fmt).removeprefix(fmt.bos) + "hello" + f"{fmt.end_of_turn}\n"
        assert _render_go_template(parsed["template"], system, "hi there", "hello") == expected


def test_parse_modelfile_refuses_what_it_cannot_read() -> None:
    with pytest.raises(UsageError, match="line 2"):
        parse_modelfile("FROM ./x.gguf\nNONSENSE here\n")
    with pytest.raises(UsageError):
        parse_modelfile('FROM ./x.gguf\nTEMPLATE """never closed\n')


def test_gguf_types_and_architectures_are_checked() -> None:
    for quant in ("q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "q4_k_m", "q6_k"):  # block quantisers and k-quants
        assert check_gguf_type(quant) == quant
    with pytest.raises(UsageError, match=r"q2_k_s.*importance matrix"):
        check_gguf_type("q2_k_s")
    with pytest.raises(UsageError, match=r"i-quant.*llama-quantize"):
        check_gguf_type("IQ4_XS")
    with pytest.raises(UsageError, match="unknown GGUF type"):
        check_gguf_type("q9")
    for name in ("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", "Gemma4ForConditionalGeneration"):
        assert check_gguf_architecture({"architectures": [name]}) == name
    with pytest.raises(UsageError, match="LlamaForCausalLM is not supported: only Gemma3ForCausalLM"):
        check_gguf_architecture({"architectures": ["LlamaForCausalLM"]})


def test_the_gguf_chat_template_has_no_transformers_only_markers() -> None:
    plain = plain_chat_template(GEMMA3)
    assert "{% generation %}" in GEMMA3.chat_template
    assert not re.search(r"(end)?generation\s*-?%\}", plain)
    assert "add_generation_prompt" in plain and GEMMA3.end_of_turn in plain


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (
            {"hidden_size_per_layer_input": 256, "vocab_size": 262144, "vocab_size_per_layer_input": 1024},
            "per-layer input embeddings for 1024 tokens",
        ),
        ({"num_kv_shared_layers": 20}, "keys and values shared across layers"),
        ({"use_double_wide_mlp": True}, "double-wide MLPs"),
        ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 4.0}}}, "yarn RoPE"),
        ({"layer_types": ["sliding_attention", "chunked_attention"]}, "chunked_attention"),
        ({"use_bidirectional_attention": "all"}, "bidirectional attention over all tokens"),
    ],
)
def test_gemma_4_features_the_converter_does_not_write_are_refused_before_the_merge(
    setting: dict[str, object], named: str
) -> None:
    """The 31B's, E2B/E4B's and 26B A4B's layouts are written (tests/gguf/); what none of them has is refused."""
    config = {"architectures": ["Gemma4ForConditionalGeneration"], "text_config": {"num_hidden_layers": 2, **setting}}
    with pytest.raises(UsageError, match=f"GGUF export of this Gemma 4 is not supported: it has .*{named}"):
        check_gguf_architecture(config)
    causal = {"architectures": ["Gemma4ForCausalLM"], "num_hidden_layers": 2, **setting}  # a text-only config
    with pytest.raises(UsageError, match=named):
        check_gguf_architecture(causal)


def test_gemma_4_with_bidirectional_attention_among_image_tokens_is_written() -> None:
    """Only image tokens attend both ways then; the GGUF holds the language model and gets text only."""
    config = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "text_config": {"use_bidirectional_attention": "vision"},
    }
    assert check_gguf_architecture(config) == "Gemma4ForConditionalGeneration"


def test_a_k_quant_of_the_experts_layout_is_refused_before_the_merge() -> None:
    """26B A4B's layout is written in f16 and the block types; its k-quants are refused by the job's first check."""
    from trainkit_core.export.gguf.writer import check_gguf_architecture

    text = {"num_hidden_layers": 2, "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2}
    config = {"architectures": ["Gemma4ForConditionalGeneration"], "text_config": text}
    assert check_gguf_architecture(config, "f16") == check_gguf_architecture(config) == "Gemma4ForConditionalGeneration"
    with pytest.raises(UsageError, match="GGUF type q4_k_m of a Gemma 4 with a mixture-of-experts block"):
        check_gguf_architecture(config, "q4_k_m")
