"""The loss of tool-calling and thinking conversations, on a real tokenizer's output.

The tiny model's tokenizer (Gemma 3's and 4's markers, Gemma 4's tool and thought tokens
as single tokens), through the train job's own path: the file's line, `parse_jsonl`,
`Example.as_record`, `encode_example`. What trains must decode to exactly the
assistant's pieces of weight 1: thinking (when kept), text, calls, and the token that
hands a call over (Gemma 4's ``<|tool_response>``) or ends the turn; never a tool's
answer, the declarations or the user's turns.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from trainkit_core.datasets.examples import parse_jsonl
from trainkit_core.models.chat_format import GEMMA3, GEMMA4, ChatFormat, encode_example, render_example, segments

pytestmark = pytest.mark.ml

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Convert a length between units.",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "number"}, "from": {"type": "string"}, "to": {"type": "string"}},
                "required": ["value", "from", "to"],
            },
        },
    }
]


def _call(call_id: str, value: float) -> dict[str, Any]:
    arguments = json.dumps({"value": value, "from": "km", "to": "mi"})
    return {"id": call_id, "type": "function", "function": {"name": "convert", "arguments": arguments}}


CONVERSATION = {
    "tools": TOOLS,
    "messages": [
        {"role": "system", "content": "You convert units with the tool."},
        {"role": "user", "content": "How far is 3 km in miles?"},
        {"role": "assistant", "content": "", "reasoning_content": "One call is enough.", "tool_calls": [_call("a", 3)]},
        {"role": "tool", "tool_call_id": "a", "content": '{"result": 1.864}'},
        {"role": "assistant", "content": "3 km is about 1.86 miles."},
        {"role": "user", "content": "And 5 km, twice over?"},
        {
            "role": "assistant",
            "content": "Converting both.",
            "tool_calls": [_call("b", 5), _call("c", 10)],
            "weight": 0,
        },
        {"role": "tool", "tool_call_id": "b", "content": "3.107"},
        {"role": "tool", "tool_call_id": "c", "content": "6.214"},
        {"role": "assistant", "content": "5 km is 3.11 miles; 10 km is 6.21 miles."},
    ],
}


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from trainkit_core.models.tiny_model import build_tokenizer

    texts = [render_example(CONVERSATION, GEMMA4), render_example(CONVERSATION, GEMMA3, keep_thinking=False)]
    return build_tokenizer(texts)


def _record() -> dict[str, Any]:
    [example], problems = parse_jsonl(json.dumps(CONVERSATION).encode(), "train.jsonl", "chat")
    assert [p for p in problems if p.severity == "error"] == []
    return example.as_record()


def _split(tokenizer: Any, encoded: dict[str, list[int]]) -> tuple[str, str]:
    pairs = list(zip(encoded["input_ids"], encoded["labels"], strict=True))
    trained = tokenizer.decode([t for t, label in pairs if label != -100])
    context = tokenizer.decode([t for t, label in pairs if label == -100])
    return trained, context


@pytest.mark.parametrize(
    ("fmt", "keep"),
    [(GEMMA4, True), (GEMMA4, False), (GEMMA3, False)],
    ids=["gemma4-thinking", "gemma4-no-thinking", "gemma3"],
)
def test_the_loss_covers_exactly_the_weighted_assistant_pieces(tokenizer: Any, fmt: ChatFormat, keep: bool) -> None:
    record = _record()
    encoded = encode_example(tokenizer, record, fmt, keep_thinking=keep)
    pieces = segments(record["messages"], fmt, tools=record["tools"], keep_thinking=keep)
    expected = "".join(text for text, trained in pieces if trained)
    trained, context = _split(tokenizer, encoded)
    assert trained == expected
    assert tokenizer.decode(encoded["input_ids"]) == render_example(record, fmt, keep_thinking=keep)
    # What trains, piece by piece: the call, the answers; never the tools' answers or the weight-0 turn.
    assert "3 km is about 1.86 miles." in trained and "10 km is 6.21 miles." in trained
    assert "Converting both." not in trained and "Converting both." in context
    assert "1.864" not in trained and "3.107" not in trained and "declaration" not in trained
    if fmt is GEMMA4:
        assert trained.count("<|tool_call>") == 1 and trained.count("<|tool_response>") == 1  # the handover trains
        assert context.count("<|tool_call>") == 2  # the weight-0 turn's two calls are context
        assert trained.count(fmt.end_of_turn) == 2
        assert ("One call is enough." in trained) is keep
        assert ("<|think|>" in context) is keep
    else:
        assert trained.count("```tool_call") == 1 and trained.count(fmt.end_of_turn) == 3
        assert "One call is enough." not in trained + context


def test_every_special_marker_is_one_token(tokenizer: Any) -> None:
    from trainkit_core.models.tool_syntax import GEMMA4_THINKING_TOKENS, GEMMA4_TOKENS

    for marker in (*GEMMA4_TOKENS, *GEMMA4_THINKING_TOKENS):
        assert len(tokenizer.encode(marker, add_special_tokens=False)) == 1, marker


@pytest.mark.parametrize(
    ("fmt", "said", "expected"),
    [
        (GEMMA4, '<|tool_call>call:convert{value:3,from:<|"|>km}<tool_call|>', "call:convert{value:3,from:km}"),
        (GEMMA4, "<|tool_call>call:convert{value:", "call:convert{value:"),
        (GEMMA3, '```tool_call\n{"name": "convert", "arguments": [3]}\n```', None),
        (GEMMA3, "```tool_call\n{oops}\n```", None),
    ],
    ids=["gemma4-unclosed-string", "gemma4-cut-off", "gemma3-arguments-not-object", "gemma3-not-json"],
)
def test_a_malformed_call_comes_back_as_the_models_text(
    tokenizer: Any, fmt: ChatFormat, said: str, expected: str | None
) -> None:
    """What a model wrote that is not a call is its answer, as text, finish `stop`: never a server error."""
    from types import SimpleNamespace

    from trainkit_core.inference.generation import answer_fields
    from trainkit_core.inference.request import GenerateRequest

    loaded = SimpleNamespace(tokenizer=tokenizer, fmt=fmt)
    req = GenerateRequest.parse({"model_size": "tiny", "prompt": "3 km?", "tools": TOOLS})
    ids = tokenizer.encode(said, add_special_tokens=False)
    fields = answer_fields(loaded, req, ids)  # type: ignore[arg-type]
    assert "tool_calls" not in fields
    assert fields["text"] == (expected if expected is not None else said)


def test_a_well_formed_call_gets_an_id_and_its_arguments(tokenizer: Any) -> None:
    from types import SimpleNamespace

    from trainkit_core.inference.generation import answer_fields
    from trainkit_core.inference.request import GenerateRequest

    said = '<|channel>thought\nEasy.<channel|><|tool_call>call:convert{value:3,from:<|"|>km<|"|>,to:<|"|>mi<|"|>}<tool_call|>'
    req = GenerateRequest.parse({"model_size": "tiny", "prompt": "3 km?", "tools": TOOLS})
    fields = answer_fields(
        SimpleNamespace(tokenizer=tokenizer, fmt=GEMMA4), req, tokenizer.encode(said, add_special_tokens=False)
    )  # type: ignore[arg-type]
    [call] = fields["tool_calls"]
    assert call["id"].startswith("call_") and call["function"] == {
        "name": "convert",
        "arguments": {"value": 3, "from": "km", "to": "mi"},
    }
    assert fields["text"] == "" and fields["reasoning_content"] == "Easy."
    # Without tools in the request, the same words are not read as a call.
    plain = GenerateRequest.parse({"model_size": "tiny", "prompt": "3 km?"})
    assert "tool_calls" not in answer_fields(
        SimpleNamespace(tokenizer=tokenizer, fmt=GEMMA4), plain, tokenizer.encode(said, add_special_tokens=False)
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_an_answer_without_calls_or_thinking_is_the_decoded_text_unchanged(tokenizer: Any, fmt: ChatFormat) -> None:
    """Leading spaces and all: what the model said, as plain generation decodes it."""
    from types import SimpleNamespace

    from trainkit_core.inference.generation import answer_fields
    from trainkit_core.inference.request import GenerateRequest

    said = " 3 km is about 1.86 miles. "
    req = GenerateRequest.parse({"model_size": "tiny", "prompt": "3 km?", "tools": TOOLS})
    fields = answer_fields(
        SimpleNamespace(tokenizer=tokenizer, fmt=fmt), req, tokenizer.encode(said, add_special_tokens=False)
    )  # type: ignore[arg-type]
    assert fields == {"text": said}


@pytest.mark.parametrize(
    ("twin_name", "keep"), [("GEMMA3MM_TWIN", False), ("GEMMA4_TWIN", True), ("GEMMA4_TWIN", False)]
)
def test_the_twins_tokenizers_train_the_same_pieces(twin_name: str, keep: bool) -> None:
    """The twins of the real presets (Gemma 3 multimodal, Gemma 4) have no tool tokens of their own:
    the markers are then several tokens, and the mask, cut on character offsets, still covers
    exactly the weighted assistant pieces (a token across a boundary would show here)."""
    from trainkit_core.models import twins

    twin = getattr(twins, twin_name)
    tokenizer = twins.build_tokenizer(twin)
    fmt = twin.chat_format
    record = _record()
    encoded = encode_example(tokenizer, record, fmt, keep_thinking=keep)
    trained, _ = _split(tokenizer, encoded)
    pieces = segments(record["messages"], fmt, tools=record["tools"], keep_thinking=keep)
    assert trained == "".join(text for text, is_trained in pieces if is_trained)
    assert tokenizer.decode(encoded["input_ids"]) == render_example(record, fmt, keep_thinking=keep)


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=["gemma3", "gemma4"])
def test_a_streamed_answer_sends_gemma4_thinking_apart_from_the_answer(tokenizer: Any, fmt: ChatFormat) -> None:
    """The streamer gets the answer's ids one token at a time, as generation hands them over."""
    import torch

    from trainkit_core.inference.generation import AnswerPieces, answer_fields
    from trainkit_core.inference.request import GenerateRequest
    from trainkit_core.models.tool_syntax import CHANNEL_CLOSE, CHANNEL_OPEN

    raw = f"{CHANNEL_OPEN}thought\nSeven and five make 12.{CHANNEL_CLOSE}The sum is 12."
    ids = tokenizer(raw, add_special_tokens=False)["input_ids"]
    pieces: list[tuple[str, str]] = []
    streamer = AnswerPieces(tokenizer, [], fmt.native_tools, lambda text, kind: pieces.append((kind, text)))
    streamer.put(torch.tensor([[1, 2, 3]]))  # the prompt: skipped
    for token in ids:
        streamer.put(torch.tensor([token]))
    streamer.end()

    def joined(kind: str) -> str:
        return "".join(text for k, text in pieces if k == kind)

    if fmt.native_tools:
        assert joined("thinking") == "Seven and five make 12." and joined("token") == "The sum is 12."
        assert len([k for k, _ in pieces if k == "thinking"]) > 1  # streamed, not sent at the end
        # The same split as the whole answer's, which the non-streamed result and the last event carry.
        from types import SimpleNamespace

        loaded = SimpleNamespace(tokenizer=tokenizer, fmt=fmt)
        whole = answer_fields(loaded, GenerateRequest(model_size="tiny", prompt="x"), ids)  # type: ignore[arg-type]
        assert (whole["reasoning_content"], whole["text"]) == (joined("thinking"), joined("token"))
    else:  # Gemma 3 has no thought channel: the markers are not special there, all of it is the answer
        assert joined("thinking") == "" and "Seven and five" in joined("token")


def test_split_thinking_on_a_growing_answer() -> None:
    from trainkit_core.inference.generation import split_thinking

    assert split_thinking("Hello") == ("", "Hello")
    assert split_thinking("<|channel>thou") == ("", "")  # the channel's name is not whole yet
    assert split_thinking("<|channel>thought\nA b") == ("A b", "")
    assert split_thinking("Hi <|channel>thought\nA b<channel|>Done") == ("A b", "Hi Done")


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=["gemma3", "gemma4"])
def test_grpo_graders_get_the_calls_read_from_the_completion_ids(tokenizer: Any, fmt: ChatFormat) -> None:
    """trl's completion text has Gemma 4's call tokens removed; the calls are read from the ids instead."""
    from trainkit_core.models import tool_syntax
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.methods.grpo import RolloutKeeper, reward_functions

    written = tool_syntax.gemma4_calls if fmt.native_tools else tool_syntax.gemma3_calls

    def completion(*calls: dict[str, Any]) -> list[int]:
        return list(tokenizer(written(list(calls)) if calls else "It is sunny.", add_special_tokens=False)["input_ids"])

    def calls_of(ids: list[int]) -> list[tuple[str, dict[str, Any]]]:
        return tool_syntax.calls_made(tokenizer.decode(ids, skip_special_tokens=False), fmt.name)

    reference = [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    ]
    line = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tool_calls": reference}
    config = TrainConfig.parse(dataset="d", method="grpo", rewards=["tool_calls"])
    [grade], _ = reward_functions(config, {"<p>": line}, RolloutKeeper(), calls_of)
    answers = [
        completion({"name": "get_weather", "arguments": {"city": "Paris"}}),
        completion({"name": "get_weather", "arguments": {"city": "Lima"}}),
        completion({"name": "get_time", "arguments": {"city": "Paris"}}),
        completion(),
    ]
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in answers]
    assert grade(["<p>"] * 4, texts, completion_ids=answers) == [1.0, 0.5, 0.0, 0.0]


def test_the_plan_counts_the_declared_tools_of_dpo_and_grpo_prompts(tokenizer: Any) -> None:
    from trainkit_core.models.chat_format import encode_example
    from trainkit_core.training.methods import get_method

    user = {"role": "user", "content": "Convert 5 km."}
    tools = CONVERSATION["tools"]
    pair = {"messages": [user], "chosen": "3.11 miles", "rejected": "no", "tools": tools}
    prompt = {"messages": [user], "tools": tools}
    for method, record in (("dpo", pair), ("grpo", prompt)):
        declared = get_method(method).as_conversations([record])
        bare = get_method(method).as_conversations([{k: v for k, v in record.items() if k != "tools"}])
        for fmt in (GEMMA3, GEMMA4):
            with_tools = len(encode_example(tokenizer, declared[0], fmt)["input_ids"])
            without = len(encode_example(tokenizer, bare[0], fmt)["input_ids"])
            assert with_tools > without + 5, (method, fmt.name)
