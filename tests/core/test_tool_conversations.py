"""Tool calling and thinking in chat datasets (OpenAI's fine-tuning format), validated at file and line.

Torch-free: the parser (`parse_jsonl`), the record the train job reads
(`Example.as_record`), and `validate_local` on a dataset folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainkit_core.datasets.examples import parse_jsonl
from trainkit_core.datasets.validate import validate_local

SPEC = 'name = "tools"\nformat = "chat"\ntrain = ["train.jsonl"]\n'
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}
#: The bare form (no type/function wrapper), normalised to the wrapped one.
TIME = {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}
TOOLS = [WEATHER, TIME]
USER = {"role": "user", "content": "Weather and time in Paris?"}
FINAL = {"role": "assistant", "content": "21 C at 14:00."}


def _call(call_id: str, name: str = "get_weather", arguments: Any = '{"city": "Paris"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _calling(*calls: Any, content: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def _answer(call_id: str, content: Any = "21 C") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _line(messages: list[Any], tools: Any = TOOLS, **extra: Any) -> bytes:
    record = {"messages": messages, **extra}
    if tools is not None:
        record["tools"] = tools
    return json.dumps(record).encode() + b"\n"


#: One call, answered, and the model going on: the smallest good tool-calling line.
def _good(i: int) -> bytes:
    return _line([USER, _calling(_call(f"g{i}")), _answer(f"g{i}"), {"role": "assistant", "content": f"Fine {i}."}])


CONVERSATION = {
    "tools": TOOLS,
    "messages": [
        {"role": "system", "content": "Use the tools."},
        USER,
        _calling(
            _call("c1", arguments='{"city": "Paris", "unit": "C"}'),
            _call("c2", "get_time", {"zone": "Europe/Paris"}),
        ),
        _answer("c2", "14:00"),
        _answer("c1", [{"type": "text", "text": "21 C"}]),
        FINAL,
    ],
}
RECORD: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Weather and time in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": {"zone": "Europe/Paris"}},
                },
            ],
        },
        {"role": "tool", "content": "14:00", "tool_call_id": "c2"},
        {"role": "tool", "content": "21 C", "tool_call_id": "c1"},
        {"role": "assistant", "content": "21 C at 14:00."},
    ],
    "tools": [
        WEATHER,
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
            },
        },
    ],
}


def test_a_tool_calling_conversation_is_kept_in_openai_form() -> None:
    [example], problems = parse_jsonl(json.dumps(CONVERSATION).encode(), "train.jsonl", "chat")
    assert problems == []
    record = example.as_record()
    assert record == RECORD
    assert list(record) == ["messages", "tools"]
    # The record is the parser's fixed point: read again, it gives the same example.
    [again], problems = parse_jsonl(json.dumps(record).encode(), "train.jsonl", "chat")
    assert problems == [] and again.key == example.key
    # Length estimates count the calls and the tools, not only the contents.
    texts = [m["content"] for m in RECORD["messages"]]
    texts += ["get_weather", '{"city": "Paris", "unit": "C"}', "get_time", '{"zone": "Europe/Paris"}']
    assert example.chars == sum(map(len, texts)) + len(json.dumps(RECORD["tools"]))


THINKING_RECORD = {
    "messages": [
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "No: 91 = 7 x 13.", "reasoning_content": "Try 7: 7 x 13 = 91."},
    ]
}


def test_thinking_is_reasoning_content_in_either_form() -> None:
    given = {"role": "assistant", "content": "No: 91 = 7 x 13.", "reasoning_content": "Try 7: 7 x 13 = 91."}
    parts = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Try 7: 7 x 13 = 91."},
            {"type": "text", "text": "No: 91 = 7 x 13."},
        ],
    }
    user = {"role": "user", "content": "Is 91 prime?"}
    data = _line([user, given], tools=None) + _line([user, parts], tools=None)
    [first, second], problems = parse_jsonl(data, "train.jsonl", "chat")
    assert problems == []
    assert first.as_record() == second.as_record() == THINKING_RECORD
    assert first.key == second.key  # the same example: a duplicate whichever form it came in
    assert first.chars == len("Is 91 prime?") + len("No: 91 = 7 x 13.") + len("Try 7: 7 x 13 = 91.")


def test_thinking_and_calls_in_one_message_and_a_final_call_without_answers() -> None:
    """A last assistant message may make calls that get no answer: it trains the calls."""
    thinking = {**_calling(_call("t1")), "reasoning_content": "I need the weather."}
    [example], problems = parse_jsonl(_line([USER, thinking]), "train.jsonl", "chat")
    assert problems == []
    [_, last] = example.as_record()["messages"]
    assert last == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        ],
        "reasoning_content": "I need the weather.",
    }


def test_a_weight_0_call_is_context_and_tool_messages_take_no_weight() -> None:
    messages = [USER, {**_calling(_call("w1")), "weight": 0}, _answer("w1"), FINAL]
    [example], problems = parse_jsonl(_line(messages), "train.jsonl", "chat")
    assert problems == [] and example.untrained == (1,)
    assert example.as_record()["messages"][1]["weight"] == 0


# (id, the bad line's messages, its tools, code, where, words). Each bad line is line 3 of
# its file, between good lines.
MALFORMED: list[tuple[str, list[Any], Any, str, str, str]] = [
    ("tools-not-list", [USER, FINAL], {"name": "x"}, "tools-invalid", '"tools" must be an array', "an object"),
    (
        "tool-without-name",
        [USER, FINAL],
        [{"type": "function", "function": {"description": "d"}}],
        "tools-invalid",
        "tools[0].function",
        'no "name"',
    ),
    ("tool-not-function", [USER, FINAL], [{"type": "retrieval"}], "tools-invalid", "tools[0]", "'retrieval'"),
    (
        "tool-parameters-string",
        [USER, FINAL],
        [{"name": "f", "parameters": "x"}],
        "tools-invalid",
        "tools[0].parameters",
        "a string",
    ),
    ("tool-duplicate", [USER, FINAL], [WEATHER, WEATHER], "tool-duplicate", "tools[1]", "'get_weather' again"),
    (
        "calls-not-list",
        [USER, {"role": "assistant", "tool_calls": _call("c")}, _answer("c"), FINAL],
        TOOLS,
        "tool-calls-invalid",
        "messages[1].tool_calls",
        "got an object",
    ),
    ("calls-empty", [USER, _calling(), FINAL], TOOLS, "tool-calls-invalid", "messages[1].tool_calls", "empty array"),
    ("call-not-object", [USER, _calling("c1")], TOOLS, "tool-calls-invalid", "messages[1].tool_calls[0]", "a string"),
    (
        "call-without-name",
        [USER, _calling({"id": "c1", "function": {"arguments": "{}"}})],
        TOOLS,
        "tool-calls-invalid",
        "messages[1].tool_calls[0]",
        "no function name",
    ),
    (
        "calls-on-user",
        [{**USER, "tool_calls": [_call("c1")]}, FINAL],
        TOOLS,
        "tool-calls-invalid",
        "messages[0] (user) has tool_calls",
        "only assistant",
    ),
    (
        "call-id-on-user",
        [{**USER, "tool_call_id": "c1"}, FINAL],
        TOOLS,
        "tool-calls-invalid",
        "messages[0] (user) has a tool_call_id",
        "only a tool message",
    ),
    (
        "call-without-id",
        [USER, _calling({"type": "function", "function": {"name": "get_weather", "arguments": "{}"}})],
        TOOLS,
        "tool-call-id-missing",
        "messages[1].tool_calls[0] (get_weather)",
        'no "id"',
    ),
    (
        "tool-without-call-id",
        [USER, _calling(_call("c1")), {"role": "tool", "content": "21 C"}, FINAL],
        TOOLS,
        "tool-call-id-missing",
        "messages[2] (tool)",
        "tool_call_id",
    ),
    (
        "call-id-twice",
        [USER, _calling(_call("c1"), _call("c1", "get_time", "{}")), _answer("c1"), FINAL],
        TOOLS,
        "tool-call-id-duplicate",
        "messages[1].tool_calls[1]",
        "'c1', which messages[1].tool_calls[0] already has",
    ),
    (
        "call-undefined",
        [USER, _calling(_call("c1", "get_news", "{}")), _answer("c1"), FINAL],
        TOOLS,
        "tool-undefined",
        "messages[1].tool_calls[0] calls 'get_news'",
        "not among the example's tools (get_weather, get_time)",
    ),
    (
        "no-tools-declared",
        [USER, _calling(_call("c1")), _answer("c1"), FINAL],
        None,
        "tool-undefined",
        "messages[1].tool_calls[0] calls 'get_weather'",
        "declares no tools",
    ),
    (
        "arguments-not-json",
        [USER, _calling(_call("c1", arguments='{"city": ')), _answer("c1"), FINAL],
        TOOLS,
        "tool-arguments-invalid",
        "messages[1].tool_calls[0] (get_weather) arguments",
        "not valid JSON",
    ),
    (
        "arguments-json-array",
        [USER, _calling(_call("c1", arguments='["Paris"]')), _answer("c1"), FINAL],
        TOOLS,
        "tool-arguments-invalid",
        "messages[1].tool_calls[0]",
        "JSON of an array, not an object",
    ),
    (
        "arguments-number",
        [USER, _calling(_call("c1", arguments=5)), _answer("c1"), FINAL],
        TOOLS,
        "tool-arguments-invalid",
        "messages[1].tool_calls[0]",
        "got a number",
    ),
    (
        "arguments-missing",
        [USER, _calling({"id": "c1", "function": {"name": "get_time"}}), _answer("c1"), FINAL],
        TOOLS,
        "tool-arguments-invalid",
        "messages[1].tool_calls[0] (get_time)",
        "missing",
    ),
    (
        "arguments-lack-required",
        [USER, _calling(_call("c1", arguments={"unit": "C"})), _answer("c1"), FINAL],
        TOOLS,
        "tool-arguments-required",
        "messages[1].tool_calls[0] (get_weather)",
        "lack 'city'",
    ),
    (
        "answer-to-no-call",
        [USER, _calling(_call("c1")), _answer("c9"), FINAL],
        TOOLS,
        "tool-response-orphan",
        "messages[2] answers tool call 'c9'",
        "messages[1] did not make (its calls: c1)",
    ),
    (
        "answer-after-plain-assistant",
        [USER, {"role": "assistant", "content": "Let me see."}, _answer("c1"), FINAL],
        TOOLS,
        "tool-response-orphan",
        "messages[2] is a tool message",
        "not an assistant message with tool_calls",
    ),
    (
        "call-unanswered",
        [USER, _calling(_call("c1"), _call("c2", "get_time", "{}")), _answer("c1"), FINAL],
        TOOLS,
        "tool-call-unanswered",
        "messages[3] (assistant)",
        "'c2' of messages[1]",
    ),
    (
        "user-after-calls",
        [USER, _calling(_call("c1")), {"role": "user", "content": "Well?"}, FINAL],
        TOOLS,
        "tool-call-unanswered",
        "messages[2] (user)",
        "'c1'",
    ),
    (
        "answer-twice",
        [USER, _calling(_call("c1")), _answer("c1"), _answer("c1"), FINAL],
        TOOLS,
        "tool-response-duplicate",
        "messages[3]",
        "'c1' a second time",
    ),
    (
        "user-after-answers",
        [USER, _calling(_call("c1")), _answer("c1"), {"role": "user", "content": "And?"}, FINAL],
        TOOLS,
        "roles-not-alternating",
        "messages[3] is a user turn",
        "after tool answers",
    ),
    (
        "ends-with-answer",
        [USER, _calling(_call("c1")), _answer("c1")],
        TOOLS,
        "last-not-assistant",
        "(messages[2]) is tool",
        "end with an assistant",
    ),
    (
        "tool-content-missing",
        [USER, _calling(_call("c1")), {"role": "tool", "tool_call_id": "c1"}, FINAL],
        TOOLS,
        "content-missing",
        "messages[2] (tool)",
        '"content"',
    ),
    (
        "tool-content-empty",
        [USER, _calling(_call("c1")), _answer("c1", ""), FINAL],
        TOOLS,
        "content-empty",
        "messages[2] (tool)",
        "empty",
    ),
    (
        "weight-on-tool",
        [USER, _calling(_call("c1")), {**_answer("c1"), "weight": 0}, FINAL],
        TOOLS,
        "weight-not-assistant",
        "messages[2] (tool)",
        "only assistant",
    ),
    (
        "reasoning-on-user",
        [{**USER, "reasoning_content": "hmm"}, FINAL],
        TOOLS,
        "reasoning-invalid",
        "messages[0] (user)",
        "only assistant",
    ),
    (
        "reasoning-empty",
        [USER, {**FINAL, "reasoning_content": ""}],
        TOOLS,
        "reasoning-invalid",
        "messages[1] reasoning_content",
        "an empty string",
    ),
    (
        "reasoning-not-string",
        [USER, {**FINAL, "reasoning_content": ["a"]}],
        TOOLS,
        "reasoning-invalid",
        "messages[1] reasoning_content",
        "an array",
    ),
    (
        "thinking-part-in-user",
        [{"role": "user", "content": [{"type": "thinking", "thinking": "x"}, {"type": "text", "text": "q"}]}, FINAL],
        TOOLS,
        "reasoning-invalid",
        "messages[0].content[0]",
        "user message",
    ),
    (
        "thinking-part-and-reasoning",
        [
            USER,
            {
                "role": "assistant",
                "reasoning_content": "a",
                "content": [{"type": "thinking", "thinking": "b"}, {"type": "text", "text": "c"}],
            },
        ],
        TOOLS,
        "reasoning-invalid",
        "messages[1]",
        "give its thinking once",
    ),
    (
        "thinking-only",
        [USER, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}],
        TOOLS,
        "content-empty",
        "messages[1] (assistant)",
        "thinking is no answer",
    ),
    (
        "marker-in-arguments",
        [USER, _calling(_call("c1", arguments={"city": "<end_of_turn>"})), _answer("c1"), FINAL],
        TOOLS,
        "chat-marker",
        "messages[1].tool_calls[0] arguments",
        "'<end_of_turn>'",
    ),
    (
        "marker-in-reasoning",
        [USER, {**FINAL, "reasoning_content": "x<start_of_turn>user"}],
        TOOLS,
        "chat-marker",
        "messages[1] (assistant) reasoning_content",
        "'<start_of_turn>'",
    ),
    (
        "marker-in-tools",
        [USER, FINAL],
        [{"name": "f", "description": "ends <end_of_turn>"}],
        "chat-marker",
        "tools",
        "'<end_of_turn>'",
    ),
]


@pytest.mark.parametrize(
    ("case", "messages", "tools", "code", "where", "words"), MALFORMED, ids=[c[0] for c in MALFORMED]
)
def test_a_malformed_tool_line_is_reported_at_its_line(
    case: str, messages: list[Any], tools: Any, code: str, where: str, words: str
) -> None:
    data = _good(1) + _good(2) + _line(messages, tools=tools) + _good(4)
    examples, problems = parse_jsonl(data, "train.jsonl", "chat")
    assert [ex.line for ex in examples] == [1, 2, 4], problems
    found = [p for p in problems if p.code == code and p.severity == "error"]
    assert len(found) == 1, [p.describe() for p in problems]
    [problem] = found
    assert (problem.file, problem.line) == ("train.jsonl", 3)
    assert where in problem.message and words in problem.message, problem.message


def test_a_dataset_folder_reports_each_bad_line_and_keeps_the_good_ones(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "dataset.toml").write_text(SPEC)
    bad = {case: _line(messages, tools=tools) for case, messages, tools, *_ in MALFORMED}
    (folder / "train.jsonl").write_bytes(
        _good(1)
        + bad["call-undefined"]
        + json.dumps(CONVERSATION).encode()
        + b"\n"
        + bad["answer-to-no-call"]
        + _good(5)
        + bad["arguments-lack-required"]
    )
    report = validate_local(folder)
    assert [(p.line, p.code) for p in report.errors] == [
        (2, "tool-undefined"),
        (4, "tool-response-orphan"),
        (6, "tool-arguments-required"),
    ]
    assert report.train_examples == 3 and report.warnings == []


def test_examples_that_differ_only_in_arguments_are_not_duplicates(tmp_path: Path) -> None:
    paris = _line([USER, _calling(_call("c1")), _answer("c1"), FINAL])
    rome = paris.replace(b"Paris\\", b"Rome\\")
    assert rome != paris
    [one, other, same], problems = parse_jsonl(paris + rome + paris, "train.jsonl", "chat")
    assert problems == []
    assert one.messages == other.messages and one.key != other.key and one.key == same.key
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "dataset.toml").write_text(SPEC)
    (folder / "train.jsonl").write_bytes(paris + rome + paris)
    report = validate_local(folder)
    assert [(p.line, p.code, p.message) for p in report.warnings] == [(3, "duplicate", "duplicate of train.jsonl:1")]


def test_examples_that_differ_only_in_tools_are_not_duplicates() -> None:
    messages = [USER, _calling(_call("c1")), _answer("c1"), FINAL]
    [one, other], problems = parse_jsonl(_line(messages) + _line(messages, tools=[WEATHER]), "t.jsonl", "chat")
    assert problems == [] and one.key != other.key


def test_unknown_keys_in_a_call_or_a_tool_still_warn() -> None:
    tool = {**WEATHER, "function": {**WEATHER["function"], "strict": True, "examples": []}, "cache": 1}
    call = {**_call("c1"), "index": 0}
    call["function"] = {**call["function"], "thought": "x"}
    messages = [USER, _calling(call), {**_answer("c1"), "name": "get_weather"}, {**FINAL, "name": "bot"}]
    data = _line(messages, tools=[tool, TIME], parallel_tool_calls=False)
    [example], problems = parse_jsonl(data, "train.jsonl", "chat")
    assert {p.severity for p in problems} == {"warning"}
    assert sorted(p.message.split("'")[1] for p in problems) == [
        "messages[1].tool_calls[0].function.thought",
        "messages[1].tool_calls[0].index",
        "messages[3].name",
        "tools[0].cache",
        "tools[0].function.examples",
    ]
    # What is kept is OpenAI's normalised form; the unknown keys are dropped.
    assert example.as_record()["tools"][0] == WEATHER
    assert example.as_record()["messages"][1]["tool_calls"][0] == _call("c1", arguments={"city": "Paris"})


def test_a_prompt_with_tool_calls_is_refused_not_crashed_on() -> None:
    """Preference and prompt data keep to text turns (for now); tool calling is for chat datasets."""
    pair = {
        "input": {"messages": [USER, _calling(_call("c1")), _answer("c1"), {"role": "user", "content": "And?"}]},
        "preferred_output": [{"role": "assistant", "content": "good"}],
        "non_preferred_output": [{"role": "assistant", "content": "bad"}],
    }
    examples, problems = parse_jsonl(json.dumps(pair).encode(), "pairs.jsonl", "preference")
    assert examples == [] and [p.code for p in problems] == ["prompt-tools-unsupported"]
    assert "input.messages[1]" in problems[0].message
    prompt = {"messages": [USER, {**FINAL, "reasoning_content": "x"}, {"role": "user", "content": "q"}]}
    examples, problems = parse_jsonl(json.dumps(prompt).encode(), "prompts.jsonl", "prompt")
    assert examples == [] and [p.code for p in problems] == ["prompt-tools-unsupported"]


def test_preference_and_prompt_data_declare_tools_to_the_model() -> None:
    """A DPO pair's ``input.tools`` and a GRPO prompt's ``tools`` are rendered in the prompt, as in chat data."""
    from trainkit_core.models.chat_format import GEMMA3, GEMMA4, render_prompt
    from trainkit_core.training.methods.dpo import preference_rows
    from trainkit_core.training.methods.grpo import prompt_rows

    pair = {
        "input": {"messages": [USER], "tools": [WEATHER], "parallel_tool_calls": False},
        "preferred_output": [{"role": "assistant", "content": "I will check."}],
        "non_preferred_output": [{"role": "assistant", "content": "No idea."}],
    }
    prompt = {"messages": [USER], "tools": [WEATHER], "reference": "x"}
    [pair_example], problems = parse_jsonl(json.dumps(pair).encode(), "pairs.jsonl", "preference")
    assert problems == []
    [prompt_example], problems = parse_jsonl(json.dumps(prompt).encode(), "prompts.jsonl", "prompt")
    assert problems == []
    assert pair_example.as_record()["tools"] == [WEATHER] == prompt_example.as_record()["tools"]
    assert "tools" not in dict(prompt_example.fields)  # the graders' fields are the rest of the line
    for fmt in (GEMMA3, GEMMA4):
        declared = render_prompt([USER], fmt, tools=[WEATHER])
        assert declared != render_prompt([USER], fmt) and "get_weather" in declared
        [row] = preference_rows([pair_example.as_record()], fmt)
        assert row["prompt"] == declared
        rows, _ = prompt_rows([prompt_example.as_record()], fmt)
        assert rows == [{"prompt": declared}]


@pytest.mark.parametrize(
    ("tools", "code"),
    [
        ("get_weather", "tools-invalid"),
        ([{"type": "function", "function": {}}], "tool"),
        ([WEATHER, WEATHER], "tool-duplicate"),
    ],
)
def test_malformed_declared_tools_of_a_pair_or_a_prompt_are_refused_at_their_line(tools: Any, code: str) -> None:
    pair = {
        "input": {"messages": [USER], "tools": tools},
        "preferred_output": [{"role": "assistant", "content": "a"}],
        "non_preferred_output": [{"role": "assistant", "content": "b"}],
    }
    good = {**pair, "input": {"messages": [USER]}}
    examples, problems = parse_jsonl(f"{json.dumps(good)}\n{json.dumps(pair)}\n".encode(), "pairs.jsonl", "preference")
    assert len(examples) == 1 and problems and all(p.line == 2 and p.code.startswith(code) for p in problems)
    assert "input.tools" in problems[0].message
    prompt = {"messages": [USER], "tools": tools}
    examples, problems = parse_jsonl(json.dumps(prompt).encode(), "prompts.jsonl", "prompt")
    assert examples == [] and problems and problems[0].code.startswith(code)


def _pair_with(preferred: dict[str, Any], other: dict[str, Any] | None = None, tools: Any = None) -> dict[str, Any]:
    given: dict[str, Any] = {"messages": [USER]}
    if tools is not None:
        given["tools"] = tools
    return {
        "input": given,
        "preferred_output": [preferred],
        "non_preferred_output": [other or {"role": "assistant", "content": "I cannot tell."}],
    }


def test_a_dpo_answer_may_call_tools_and_is_written_as_the_chat_format_writes_calls() -> None:
    from trainkit_core.evals.preference import with_answer
    from trainkit_core.models import tool_syntax
    from trainkit_core.models.chat_format import GEMMA3, GEMMA4
    from trainkit_core.training.methods.dpo import preference_rows

    calling = _calling(_call("c1", arguments='{"city": "Paris"}'))
    [example], problems = parse_jsonl(
        json.dumps(_pair_with(calling, tools=[WEATHER])).encode(), "pairs.jsonl", "preference"
    )
    assert problems == []
    record = example.as_record()
    assert record["chosen"] == "" and record["chosen_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert with_answer(record, "chosen")[-1]["tool_calls"] == record["chosen_calls"]
    [row] = preference_rows([record], GEMMA4)
    assert row["chosen"] == tool_syntax.gemma4_calls(record["chosen_calls"]) + tool_syntax.RESPONSE_OPEN
    assert row["rejected"] == "I cannot tell." + GEMMA4.end_of_turn + "\n"
    [row] = preference_rows([record], GEMMA3)
    assert row["chosen"] == tool_syntax.gemma3_calls(record["chosen_calls"]) + GEMMA3.end_of_turn + "\n"


@pytest.mark.parametrize(
    ("preferred", "tools", "code", "words"),
    [
        (_calling(_call("c1", name="get_stock")), [WEATHER], "tool-undefined", "preferred_output[0].tool_calls[0]"),
        (_calling(_call("c1")), None, "tool-undefined", "input.tools"),
        (_calling(_call("c1", arguments="{not json")), [WEATHER], "tool-arguments-invalid", "preferred_output[0]"),
        (_calling(_call("c1", arguments="{}")), [WEATHER], "tool-arguments-required", "'city'"),
        ({"role": "assistant", "tool_calls": []}, [WEATHER], "tool-calls-invalid", "preferred_output[0]"),
        ({"role": "assistant", "content": None}, [WEATHER], "content-not-string", "preferred_output[0]"),
    ],
)
def test_a_dpo_answers_calls_are_checked_at_their_line(preferred: Any, tools: Any, code: str, words: str) -> None:
    good = _pair_with({"role": "assistant", "content": "Sunny."}, tools=[WEATHER])
    data = f"{json.dumps(good)}\n{json.dumps(_pair_with(preferred, tools=tools))}\n".encode()
    examples, problems = parse_jsonl(data, "pairs.jsonl", "preference")
    assert len(examples) == 1 and problems, problems
    assert problems[0].line == 2 and problems[0].code == code and words in problems[0].message, problems


def test_two_answers_making_the_same_calls_are_one_answer() -> None:
    one = _calling(_call("c1", arguments='{"city": "Paris"}'))
    other = _calling(_call("c9", arguments={"city": "Paris"}))  # another id, the same call
    examples, problems = parse_jsonl(
        json.dumps(_pair_with(one, other, tools=[WEATHER])).encode(), "pairs.jsonl", "preference"
    )
    assert examples == [] and [p.code for p in problems] == ["sides-identical"]
