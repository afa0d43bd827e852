"""The Gemma chat formats as text (no tokenizer): what training and inference both render."""

from __future__ import annotations

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.models.chat_format import GEMMA3, GEMMA4, fold_system, get_format, render, render_prompt, segments

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": " Hi "},
    {"role": "assistant", "content": "Hello."},
]


def test_gemma3_text_with_the_system_folded_into_the_first_user_turn() -> None:
    assert render(CONVERSATION, GEMMA3) == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
    )


def test_gemma4_text() -> None:
    assert render(CONVERSATION, GEMMA4) == "<bos><|turn>user\nBe brief.\n\nHi<turn|>\n<|turn>model\nHello.<turn|>\n"


def test_prompt_for_inference_drops_the_reference_answer_and_opens_the_model_turn() -> None:
    assert render_prompt(CONVERSATION, GEMMA3).endswith("Hi<end_of_turn>\n<start_of_turn>model\n")
    assert render_prompt(CONVERSATION[:2], GEMMA4).endswith("<|turn>model\n")


def test_only_assistant_pieces_are_trained() -> None:
    trained = [text for text, is_trained in segments(CONVERSATION, GEMMA3) if is_trained]
    assert trained == ["Hello.<end_of_turn>\n"]


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}], "may only come first"),
        ([{"role": "tool", "content": "a"}], "unknown role 'tool'"),
        ([{"role": "system", "content": "a"}, {"role": "assistant", "content": "b"}], "followed by a user"),
    ],
)
def test_bad_conversations_are_refused(messages: list[dict[str, str]], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        fold_system(messages)


def test_unknown_format() -> None:
    with pytest.raises(UsageError, match="gemma3, gemma4"):
        get_format("llama3")
