"""The Gemma chat formats as text (no tokenizer): what training and inference both render."""

from __future__ import annotations

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.models.chat_format import GEMMA3, GEMMA4, get_format, render, render_prompt, segments

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
        ([{"role": "robot", "content": "a"}], "unknown role 'robot'"),
        ([{"role": "user", "content": "a"}, {"role": "tool", "content": "b", "tool_call_id": "c1"}], "no earlier"),
        ([{"role": "system", "content": "a"}, {"role": "assistant", "content": "b"}], "followed by a user"),
    ],
)
def test_bad_conversations_are_refused(messages: list[dict[str, str]], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        render(messages, GEMMA3)


def test_unknown_format() -> None:
    with pytest.raises(UsageError, match="gemma3, gemma4"):
        get_format("llama3")


# --------------------------------------------------------------------------- tools and thinking

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Convert a length.",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "number"}, "unit": {"type": "string"}},
                "required": ["value", "unit"],
            },
        },
    }
]
CALLING = [
    {"role": "system", "content": "Use the tools."},
    {"role": "user", "content": "3 km in miles?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Call convert.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "convert", "arguments": '{"value": 3, "unit": "km"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"miles": 1.86}'},
    {"role": "assistant", "content": "About 1.86 miles."},
]


def test_gemma4_writes_declarations_calls_answers_and_thinking_in_its_own_tokens() -> None:
    assert render(CALLING, GEMMA4, tools=TOOLS) == (
        "<bos><|turn>system\n<|think|>Use the tools."
        '<|tool>declaration:convert{description:<|"|>Convert a length.<|"|>,parameters:{type:<|"|>OBJECT<|"|>,'
        'properties:{value:{type:<|"|>NUMBER<|"|>},unit:{type:<|"|>STRING<|"|>}},required:[<|"|>value<|"|>,<|"|>unit<|"|>]}}'
        "<tool|><turn|>\n"
        "<|turn>user\n3 km in miles?<turn|>\n"
        "<|turn>model\n<|channel>thought\nCall convert.<channel|>"
        '<|tool_call>call:convert{value:3,unit:<|"|>km<|"|>}<tool_call|><|tool_response>'
        'response:convert{value:<|"|>{"miles": 1.86}<|"|>}<tool_response|>'
        "About 1.86 miles.<turn|>\n"
    )


def test_gemma4_trains_thinking_calls_and_the_handover_but_not_the_tools_answer() -> None:
    trained = [text for text, is_trained in segments(CALLING, GEMMA4, tools=TOOLS) if is_trained]
    assert trained == [
        '<|channel>thought\nCall convert.<channel|><|tool_call>call:convert{value:3,unit:<|"|>km<|"|>}<tool_call|><|tool_response>',
        "About 1.86 miles.<turn|>\n",
    ]
    dropped = [text for text, is_trained in segments(CALLING, GEMMA4, tools=TOOLS, keep_thinking=False) if is_trained]
    assert dropped[0].startswith("<|tool_call>") and "<|think|>" not in render(
        CALLING, GEMMA4, tools=TOOLS, keep_thinking=False
    )


def test_gemma3_describes_tools_in_the_prompt_and_calls_in_fenced_json() -> None:
    text = render(CALLING, GEMMA3, tools=TOOLS, keep_thinking=False)
    assert text.startswith("<bos><start_of_turn>user\nUse the tools.\n\nYou can call these functions.")
    assert '"name": "convert"' in text.split("<end_of_turn>")[0]
    assert (
        "<start_of_turn>model\n```tool_call\n"
        '{"name": "convert", "arguments": {"value": 3, "unit": "km"}}\n```<end_of_turn>\n'
        "<start_of_turn>user\n```tool_response\n"
        '{"name": "convert", "content": "{\\"miles\\": 1.86}"}\n```<end_of_turn>\n'
        "<start_of_turn>model\nAbout 1.86 miles.<end_of_turn>\n"
    ) in text


def test_thinking_on_gemma3_is_refused_unless_dropped() -> None:
    with pytest.raises(UsageError, match="gemma3 chat format has no place"):
        render(CALLING, GEMMA3, tools=TOOLS)


def test_the_prompt_after_a_tools_answer_continues_the_model_turn_on_gemma4_and_opens_one_on_gemma3() -> None:
    so_far = CALLING[:4]
    assert render_prompt(so_far, GEMMA4, tools=TOOLS).endswith('{"miles": 1.86}<|"|>}<tool_response|>')
    assert render_prompt(so_far, GEMMA3, tools=TOOLS).endswith("```<end_of_turn>\n<start_of_turn>model\n")
    # earlier thinking is not shown again to the model at inference
    assert "Call convert." not in render_prompt(so_far, GEMMA4, tools=TOOLS)


def test_two_answers_share_one_gemma3_user_turn() -> None:
    calls = [{"id": f"c{i}", "function": {"name": "convert", "arguments": {"value": i, "unit": "km"}}} for i in (1, 2)]
    messages = [
        {"role": "user", "content": "1 and 2 km?"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "0.62"},
        {"role": "tool", "tool_call_id": "c2", "content": "1.24"},
        {"role": "assistant", "content": "0.62 and 1.24 miles."},
    ]
    text = render(messages, GEMMA3, tools=TOOLS)
    assert text.count("<start_of_turn>user\n") == 2 and text.count("```tool_response") == 2
    text4 = render(messages, GEMMA4, tools=TOOLS)
    assert text4.count("<|tool_response>") == 2 and text4.count("<|turn>model") == 1


@pytest.mark.parametrize(
    "value",
    [{"a": 1, "b": "x y", "c": [1, "z", {"d": None}], "e": True, "f": -2.5e3}, {}, {"s": 'quote " and, colon: }'}],
)
def test_gemma4_values_round_trip(value: dict[str, object]) -> None:
    from trainkit_core.models.tool_syntax import gemma4_value, parse_gemma4_value

    assert parse_gemma4_value(gemma4_value(value)) == value


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_a_rendered_call_parses_back_from_the_models_answer(fmt) -> None:  # type: ignore[no-untyped-def]
    from trainkit_core.models.tool_syntax import parse_answer

    pieces = segments(CALLING[:3], fmt, tools=TOOLS, keep_thinking=fmt is GEMMA4)
    answer = pieces[-1][0].removesuffix(fmt.end_of_turn + "\n")  # generation stops before the stop token
    parsed = parse_answer(answer, fmt.name)
    assert parsed["tool_calls"] == [{"name": "convert", "arguments": {"value": 3, "unit": "km"}}]
    assert parsed["content"] == ("" if fmt is GEMMA4 else "<end_of_turn>") or parsed["content"] == ""
    assert parsed["reasoning_content"] == ("Call convert." if fmt is GEMMA4 else None)


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('<|tool_call>call:convert{value:3,unit:<|"|>km}<tool_call|>', "gemma4"),
        ("<|tool_call>call:convert{value:3", "gemma4"),
        ("<|tool_call>call:convert{value:}<tool_call|>", "gemma4"),
        ('```tool_call\n{"name": "convert", "arguments": [1]}\n```', "gemma3"),
        ("```tool_call\n{not json}\n```", "gemma3"),
        ('```tool_call\n{"name": "convert"', "gemma3"),
    ],
)
def test_a_malformed_call_is_a_syntax_error(text: str, fmt: str) -> None:
    from trainkit_core.models.tool_syntax import ToolSyntaxError, parse_answer

    with pytest.raises(ToolSyntaxError):
        parse_answer(text, fmt)
