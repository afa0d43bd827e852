"""How each Gemma format writes tools, tool calls, tool answers and thinking, both ways.

Rendering (training and inference prompts) and parsing (the model's answer back into
OpenAI's ``tool_calls``) live side by side, so a call the renderer writes is a call the
parser reads: the tests round-trip them.

Gemma 4 has tokens of its own (its model card and official chat template)::

    <|tool>declaration:NAME{description:<|"|>…<|"|>,parameters:{…}}<tool|>   in the system turn
    <|tool_call>call:NAME{city:<|"|>Paris<|"|>,days:3}<tool_call|>          in the model's turn
    <|tool_response>response:NAME{value:<|"|>21 C<|"|>}<tool_response|>     the answer, same turn
    <|channel>thought\\n…<channel|>                                          the model's thinking
    <|think|>                                                               at the start of the system turn: thinking on

Its values are JSON with bare keys and strings between ``<|"|>`` tokens (so a string
needs no escaping). Schema types in declarations are upper-case (``STRING``, ``OBJECT``),
as Google's template writes them.

Gemma 3 has no tool tokens. Google documents function calling for it as a prompt
convention: the tools described in the (first) user turn, a call written by the model as
a fenced block, the result given back in a user turn. trainkit uses fenced JSON::

    ```tool_call
    {"name": "convert", "arguments": {"value": 3, "unit": "km"}}
    ```

and answers as ```` ```tool_response ```` blocks of ``{"name": …, "content": …}``.
Gemma 3 has no thinking.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

QUOTE = '<|"|>'
TOOL_OPEN, TOOL_CLOSE = "<|tool>", "<tool|>"
CALL_OPEN, CALL_CLOSE = "<|tool_call>", "<tool_call|>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<|tool_response>", "<tool_response|>"
CHANNEL_OPEN, CHANNEL_CLOSE = "<|channel>", "<channel|>"
THINK = "<|think|>"
#: Gemma 4's tool and thinking tokens (beside its turn markers).
GEMMA4_TOKENS = (TOOL_OPEN, TOOL_CLOSE, CALL_OPEN, CALL_CLOSE, RESPONSE_OPEN, RESPONSE_CLOSE, QUOTE)
GEMMA4_THINKING_TOKENS = (CHANNEL_OPEN, CHANNEL_CLOSE, THINK)

FENCE_CALL = "```tool_call\n"
FENCE_RESPONSE = "```tool_response\n"
FENCE_END = "\n```"


class ToolSyntaxError(ValueError):
    """The model's text is not a well-formed call; the caller returns it as plain text."""


# --------------------------------------------------------------------------- Gemma 4 values


def gemma4_value(value: Any, *, upper_types: bool = False) -> str:
    """A JSON value in Gemma 4's notation (bare keys, strings between ``<|"|>``)."""
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if upper_types and key == "type" and isinstance(item, str):
                item = item.upper()
            items.append(f"{key}:{gemma4_value(item, upper_types=upper_types)}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(gemma4_value(item, upper_types=upper_types) for item in value) + "]"
    if isinstance(value, str):
        return QUOTE + value + QUOTE
    return json.dumps(value)  # numbers, true, false, null


_KEY = re.compile(r"[^\s:{}\[\],]+")
_SCALAR = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null")


def parse_gemma4_value(text: str) -> Any:
    """The inverse of `gemma4_value`; `ToolSyntaxError` for anything else."""
    value, end = _parse_value(text, 0)
    if text[end:].strip():
        raise ToolSyntaxError(f"unexpected text after a value: {text[end:][:40]!r}")
    return value


def _parse_value(text: str, pos: int) -> tuple[Any, int]:
    pos = _skip(text, pos)
    if text.startswith(QUOTE, pos):
        end = text.find(QUOTE, pos + len(QUOTE))
        if end < 0:
            raise ToolSyntaxError("a string is not closed")
        return text[pos + len(QUOTE) : end], end + len(QUOTE)
    if text.startswith("{", pos):
        pairs, end = _parse_items(text, pos + 1, "}", _parse_pair)
        return dict(pairs), end
    if text.startswith("[", pos):
        return _parse_items(text, pos + 1, "]", _parse_value)
    match = _SCALAR.match(text, pos)
    if match is None:
        raise ToolSyntaxError(f"not a value at {pos}: {text[pos : pos + 20]!r}")
    return json.loads(match.group()), match.end()


def _parse_items(text: str, pos: int, close: str, item: Any) -> tuple[list[Any], int]:
    """The comma-separated items up to `close` (an object's pairs, an array's values), and the position after it."""
    items: list[Any] = []
    pos = _skip(text, pos)
    if text.startswith(close, pos):
        return items, pos + 1
    while True:
        found, pos = item(text, pos)
        items.append(found)
        pos = _skip(text, pos)
        if text.startswith(close, pos):
            return items, pos + 1
        if not text.startswith(",", pos):
            raise ToolSyntaxError(f"expected ',' or {close!r} at {pos}")
        pos += 1


def _parse_pair(text: str, pos: int) -> tuple[tuple[str, Any], int]:
    pos = _skip(text, pos)
    key = _KEY.match(text, pos)
    if key is None or not text.startswith(":", key.end()):
        raise ToolSyntaxError(f"expected a key and ':' at {pos}")
    value, pos = _parse_value(text, key.end() + 1)
    return (key.group(), value), pos


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


# --------------------------------------------------------------------------- rendering


def function_of(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """A tool's function definition, from OpenAI's ``{"type": "function", "function": {…}}`` or bare."""
    inner = tool.get("function")
    return inner if isinstance(inner, Mapping) else tool


def arguments_of(call: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as an object (OpenAI sends them as a JSON string)."""
    arguments = function_of(call).get("arguments", {})
    if isinstance(arguments, str):
        arguments = json.loads(arguments) if arguments.strip() else {}
    return dict(arguments)


def gemma4_declarations(tools: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for tool in tools:
        fn = function_of(tool)
        body: dict[str, Any] = {}
        if fn.get("description"):
            body["description"] = fn["description"]
        if fn.get("parameters"):
            body["parameters"] = fn["parameters"]
        out.append(f"{TOOL_OPEN}declaration:{fn['name']}{gemma4_value(body, upper_types=True)}{TOOL_CLOSE}")
    return "".join(out)


def gemma4_calls(calls: Sequence[Mapping[str, Any]]) -> str:
    return "".join(
        f"{CALL_OPEN}call:{function_of(c)['name']}{gemma4_value(arguments_of(c))}{CALL_CLOSE}" for c in calls
    )


def gemma4_response(name: str, content: Any) -> str:
    """A tool's answer: an object's fields, else the text as ``{value:…}`` (a JSON text stays text,
    so the saved Jinja template, which cannot parse JSON, writes the same)."""
    body = content if isinstance(content, Mapping) else {"value": content}
    return f"response:{name}{gemma4_value(body)}{RESPONSE_CLOSE}"


def gemma4_thought(reasoning: str) -> str:
    return f"{CHANNEL_OPEN}thought\n{reasoning.strip()}{CHANNEL_CLOSE}"


def gemma3_tools_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    definitions = json.dumps([dict(function_of(t)) for t in tools], ensure_ascii=False)
    return (
        "You can call these functions. To call one, answer with a block\n"
        f'{FENCE_CALL}{{"name": <function name>, "arguments": <object>}}{FENCE_END}\n'
        f"Functions: {definitions}"
    )


def gemma3_calls(calls: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(
        FENCE_CALL
        + json.dumps({"name": function_of(c)["name"], "arguments": arguments_of(c)}, ensure_ascii=False)
        + FENCE_END
        for c in calls
    )


def gemma3_response(name: str, content: str) -> str:
    return FENCE_RESPONSE + json.dumps({"name": name, "content": content}, ensure_ascii=False) + FENCE_END


# --------------------------------------------------------------------------- parsing the model's answer

_GEMMA4_CALL = re.compile(re.escape(CALL_OPEN) + r"call:([^\s{]+)(\{.*?\})" + re.escape(CALL_CLOSE), re.DOTALL)
_GEMMA3_CALL = re.compile(r"```tool_call\n(.*?)\n```", re.DOTALL)
_THOUGHT = re.compile(re.escape(CHANNEL_OPEN) + r"thought\n?(.*?)" + re.escape(CHANNEL_CLOSE), re.DOTALL)


def parse_answer(text: str, fmt_name: str) -> dict[str, Any]:
    """The model's raw answer (special tokens kept) as ``content``, ``tool_calls``, ``reasoning_content``.

    `ToolSyntaxError` when the text holds a call that does not parse; callers then
    return the text as it is.
    """
    reasoning = None
    if fmt_name == "gemma4":
        thoughts = _THOUGHT.findall(text)
        if thoughts:
            reasoning = "\n".join(t.strip() for t in thoughts)
        text = _THOUGHT.sub("", text)
        calls = []
        for name, body in _GEMMA4_CALL.findall(text):
            arguments = parse_gemma4_value(body)
            calls.append((name, arguments))
        content = _GEMMA4_CALL.sub("", text)
        if CALL_OPEN in content or CALL_CLOSE in content:
            raise ToolSyntaxError("a tool call is not closed")
        content = content.replace(RESPONSE_OPEN, "")
    else:
        calls = []
        for block in _GEMMA3_CALL.findall(text):
            try:
                parsed = json.loads(block)
            except ValueError as exc:
                raise ToolSyntaxError(f"a tool_call block is not JSON: {exc}") from None
            if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
                raise ToolSyntaxError("a tool_call block has no name")
            arguments = parsed.get("arguments", {})
            if not isinstance(arguments, dict):
                raise ToolSyntaxError("a tool_call block's arguments are not an object")
            calls.append((parsed["name"], arguments))
        content = _GEMMA3_CALL.sub("", text)
        if "```tool_call" in content:
            raise ToolSyntaxError("a tool_call block is not closed")
    return {
        "content": content.strip(),
        "tool_calls": [{"name": name, "arguments": arguments} for name, arguments in calls],
        "reasoning_content": reasoning,
    }


def calls_made(raw: str, fmt_name: str) -> list[tuple[str, dict[str, Any]]]:
    """The (function name, arguments) of the calls in a model's raw answer; none when they do not parse."""
    try:
        return [(call["name"], call["arguments"]) for call in parse_answer(raw, fmt_name)["tool_calls"]]
    except ToolSyntaxError:
        return []


def call_key(name: str, arguments: Any) -> str:
    """A call as comparable text: the function and its arguments as JSON with sorted keys."""
    return json.dumps([name, arguments], sort_keys=True)
