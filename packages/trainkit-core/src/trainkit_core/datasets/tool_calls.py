"""Tools and tool calls in chat examples (OpenAI's fine-tuning format): their shape and their references.

A chat example may declare the functions its model may call::

    {"tools": [{"type": "function", "function": {"name": "get_weather", "description": "…",
                "parameters": {"type": "object", "properties": {…}, "required": ["city"]}}}],
     "messages": [… {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                      "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "21 C"}, …]}

A tool may also be given bare (``{"name": …, "parameters": …}``, the form of OpenAI's
Responses API); it is normalised to the wrapped form. A call's ``arguments`` may be a
JSON string (what OpenAI's API returns) or an object; either is kept as an object, so
that the renderer never parses JSON and a string that is not an object is refused here,
at its line, rather than in a training job.

`parse_tools` and `parse_calls` check the shape; `check_calls` checks what the calls
refer to (declared functions, their required arguments, ids used once). Where the
tool messages go is part of the chat order (`trainkit_core.datasets.examples`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from trainkit_core.datasets.problems import Problem
from trainkit_core.datasets.strict_json import StrictJSONError, loads

#: The keys of a function's definition (``strict`` is OpenAI's; accepted, not used).
FUNCTION_KEYS = ("name", "description", "parameters", "strict")
#: The keys of a tool in the wrapped form.
TOOL_KEYS = ("type", "function")
#: The keys of a call, and of its function.
CALL_KEYS = ("id", "type", "function")
CALL_FUNCTION_KEYS = ("name", "arguments")

ProblemAt = Callable[[str, str], Problem]


def parse_tools(value: Any, problem: ProblemAt) -> tuple[list[dict[str, Any]] | None, list[Problem]]:
    """An example's ``tools`` in OpenAI's wrapped form (None for an empty list), or the problems."""
    if not isinstance(value, list):
        return None, [problem("tools-invalid", f'"tools" must be an array of functions, got {kind(value)}')]
    tools: list[dict[str, Any]] = []
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for index, tool in enumerate(value):
        function, found = _function(tool, f"tools[{index}]", problem)
        if function is None:
            problems.extend(found)
            continue
        name = function["name"]
        if name in seen:
            problems.append(
                problem("tool-duplicate", f"tools[{index}] defines {name!r} again (tools[{seen[name]}] did)")
            )
            continue
        seen[name] = index
        tools.append({"type": "function", "function": function})
    if problems:
        return None, problems
    return tools or None, []


def _function(tool: Any, at: str, problem: ProblemAt) -> tuple[dict[str, Any] | None, list[Problem]]:
    """One tool's function definition (name, and description and parameters where given), or its problem."""
    if not isinstance(tool, dict):
        return None, [problem("tools-invalid", f"{at} must be an object, got {kind(tool)}")]
    if tool.get("type", "function") != "function":
        return None, [problem("tools-invalid", f'{at} has type {tool["type"]!r}; only "function" tools are supported')]
    function, where = tool, at  # the bare form: the function's keys on the tool itself
    if "function" in tool:
        function, where = tool["function"], f"{at}.function"
        if not isinstance(function, dict):
            return None, [problem("tools-invalid", f"{where} must be an object, got {kind(function)}")]
    name = function.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, [problem("tools-invalid", f'{where} has no "name" (a non-empty string)')]
    found: dict[str, Any] = {"name": name}
    if "description" in function:
        if not isinstance(function["description"], str):
            return None, [
                problem("tools-invalid", f"{where}.description must be a string, got {kind(function['description'])}")
            ]
        found["description"] = function["description"]
    if "parameters" in function:
        parameters = function["parameters"]
        if not isinstance(parameters, dict):
            return None, [
                problem(
                    "tools-invalid", f"{where}.parameters must be an object (a JSON schema), got {kind(parameters)}"
                )
            ]
        required = parameters.get("required", [])
        if not isinstance(required, list) or not all(isinstance(field, str) for field in required):
            return None, [problem("tools-invalid", f"{where}.parameters.required must be an array of field names")]
        found["parameters"] = parameters
    return found, []


def parse_calls(value: Any, at: str, problem: ProblemAt) -> tuple[list[dict[str, Any]] | None, list[Problem]]:
    """An assistant message's ``tool_calls`` (message `at`), normalised with arguments as objects, or the problems."""
    if not isinstance(value, list) or not value:
        got = "an empty array" if value == [] else kind(value)
        return None, [problem("tool-calls-invalid", f"{at}.tool_calls must be a non-empty array of calls, got {got}")]
    calls: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for index, call in enumerate(value):
        where = f"{at}.tool_calls[{index}]"
        if not isinstance(call, dict):
            problems.append(problem("tool-calls-invalid", f"{where} must be an object, got {kind(call)}"))
            continue
        if call.get("type", "function") != "function":
            problems.append(
                problem("tool-calls-invalid", f'{where} has type {call["type"]!r}; only "function" calls are supported')
            )
            continue
        function = call.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(function, dict) or not isinstance(name, str) or not name.strip():
            problems.append(
                problem(
                    "tool-calls-invalid",
                    f'{where} has no function name (it needs "function": {{"name": ..., "arguments": ...}})',
                )
            )
            continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id.strip():
            problems.append(
                problem(
                    "tool-call-id-missing",
                    f'{where} ({name}) has no "id" (a string; the tool message answers with it as tool_call_id)',
                )
            )
            continue
        arguments, reason = _arguments(function)
        if arguments is None:
            problems.append(problem("tool-arguments-invalid", f"{where} ({name}) arguments {reason}"))
            continue
        calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
    if problems:
        return None, problems
    return calls, []


def _arguments(function: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A call's arguments as an object, or None and what is wrong with them."""
    if "arguments" not in function:
        return None, "are missing; give an object ({} for none)"
    arguments = function["arguments"]
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments)
        except StrictJSONError as exc:
            return None, f"are a string that is not valid JSON ({exc})"
        if not isinstance(arguments, dict):
            return None, f"are JSON of {kind(arguments)}, not an object"
        return arguments, ""
    if isinstance(arguments, dict):
        return arguments, ""
    return None, f"must be an object or a JSON string of one, got {kind(arguments)}"


def check_calls(
    calls: dict[int, list[dict[str, Any]]],
    tools: list[dict[str, Any]] | None,
    problem: ProblemAt,
    *,
    at: str = "messages[{}]",
    tools_key: str = "tools",
) -> list[Problem]:
    """What an example's calls (by message index) refer to: declared tools, their required arguments, unique ids.

    `at` names a message from its index, `tools_key` the key that declares the tools (a DPO
    pair's answers are ``preferred_output[0]``, its tools ``input.tools``).
    """
    declared = {tool["function"]["name"]: tool["function"] for tool in tools or []}
    problems: list[Problem] = []
    first: dict[str, str] = {}
    for index, made in sorted(calls.items()):
        for number, call in enumerate(made):
            where, name = f"{at.format(index)}.tool_calls[{number}]", call["function"]["name"]
            seen = first.setdefault(call["id"], where)
            if seen != where:
                problems.append(
                    problem("tool-call-id-duplicate", f"{where} has id {call['id']!r}, which {seen} already has")
                )
            if not declared:
                problems.append(
                    problem(
                        "tool-undefined",
                        f'{where} calls {name!r}, but the example declares no tools (add "{tools_key}")',
                    )
                )
                continue
            if name not in declared:
                problems.append(
                    problem(
                        "tool-undefined",
                        f"{where} calls {name!r}, which is not among the example's tools ({', '.join(declared)})",
                    )
                )
                continue
            for field in declared[name].get("parameters", {}).get("required", []):
                if field not in call["function"]["arguments"]:
                    problems.append(
                        problem(
                            "tool-arguments-required",
                            f"{where} ({name}) arguments lack {field!r}, which the tool's parameters require",
                        )
                    )
    return problems


def answer_problem(
    index: int, call_id: str, caller: int | None, answered: dict[str, bool], problem: ProblemAt
) -> Problem | None:
    """The problem of tool message `index` answering `call_id`, given the open calls of messages[`caller`].

    `answered` maps the ids of that assistant message's calls to whether an answer came
    yet; it is updated here.
    """
    if caller is None:
        return problem(
            "tool-response-orphan",
            f"messages[{index}] is a tool message, but the message before it is not an assistant message with "
            "tool_calls; a tool message answers a call of the assistant message before it",
        )
    if call_id not in answered:
        return problem(
            "tool-response-orphan",
            f"messages[{index}] answers tool call {call_id!r}, which messages[{caller}] did not make "
            f"(its calls: {', '.join(answered)})",
        )
    if answered[call_id]:
        return problem("tool-response-duplicate", f"messages[{index}] answers tool call {call_id!r} a second time")
    answered[call_id] = True
    return None


def unknown_keys(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(key path, what is expected) for each key a chat example's tools and tool calls do not define."""
    found: list[tuple[str, str]] = []
    tools = record.get("tools")
    for index, tool in enumerate(tools if isinstance(tools, list) else []):
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if isinstance(function, dict):
            found += _unknown(tool, f"tools[{index}]", TOOL_KEYS, "a tool has type and function")
            found += _unknown(
                function, f"tools[{index}].function", FUNCTION_KEYS, "a function has name, description, parameters"
            )
        else:
            found += _unknown(
                tool, f"tools[{index}]", ("type", *FUNCTION_KEYS), "a tool has name, description, parameters"
            )
    messages = record.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for number, call in enumerate(calls if isinstance(calls, list) else []):
            if not isinstance(call, dict):
                continue
            at = f"messages[{index}].tool_calls[{number}]"
            found += _unknown(call, at, CALL_KEYS, "a call has id, type and function")
            if isinstance(call.get("function"), dict):
                found += _unknown(
                    call["function"], f"{at}.function", CALL_FUNCTION_KEYS, "a call's function has name and arguments"
                )
    return found


def _unknown(value: dict[str, Any], at: str, keys: tuple[str, ...], why: str) -> list[tuple[str, str]]:
    return [(f"{at}.{key}", why) for key in value if key not in keys]


def kind(value: Any) -> str:
    """What a JSON value is, in words ("an object", "a string", ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def dumps(value: Any) -> str:
    """The JSON text an `Example` keeps: key order as given, non-ASCII as is."""
    return json.dumps(value, ensure_ascii=False)
