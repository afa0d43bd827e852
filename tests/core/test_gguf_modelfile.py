"""The Ollama Modelfile and the GGUF request checks (torch-free; the file itself: tests/gguf)."""

from __future__ import annotations

import re

import pytest

from trainkit_core.chat_format import GEMMA3, GEMMA4, ChatFormat, render_prompt
from trainkit_core.errors import UsageError
from trainkit_core.gguf_export import (
    check_gguf_architecture,
    check_gguf_type,
    modelfile_text,
    parse_modelfile,
    plain_chat_template,
)


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
    for name in ("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"):
        assert check_gguf_architecture({"architectures": [name]}) == name
    # Gemma 4: llama.cpp reads it, trainkit's converter does not write it; the refusal says so.
    with pytest.raises(UsageError, match=r"Gemma4ForConditionalGeneration is not supported: llama\.cpp reads Gemma 4"):
        check_gguf_architecture({"architectures": ["Gemma4ForConditionalGeneration"]})
    with pytest.raises(UsageError, match="LlamaForCausalLM is not supported: only Gemma3ForCausalLM"):
        check_gguf_architecture({"architectures": ["LlamaForCausalLM"]})


def test_the_gguf_chat_template_has_no_transformers_only_markers() -> None:
    plain = plain_chat_template(GEMMA3)
    assert "{% generation %}" in GEMMA3.chat_template
    assert not re.search(r"(end)?generation\s*-?%\}", plain)
    assert "add_generation_prompt" in plain and GEMMA3.end_of_turn in plain
