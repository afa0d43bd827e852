"""The built-in graders. Each is ``grade(completion, example) -> float``.

`example` is the prompt's line of the dataset: its `messages` and every other field
the line carries (``reference``, ``pattern``, ``max_chars``...). A grader needing a field
the line lacks raises `KeyError` naming it, which fails the run naming the grader and
the example (never a silent zero).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

Grader = Callable[[str, Mapping[str, Any]], float]


def _field(example: Mapping[str, Any], name: str) -> Any:
    if name not in example:
        raise KeyError(f"the example has no {name!r} field")
    return example[name]


def exact_match(completion: str, example: Mapping[str, Any]) -> float:
    """1 when the completion, stripped, equals the example's `reference`, else 0."""
    return 1.0 if completion.strip() == str(_field(example, "reference")).strip() else 0.0


def contains(completion: str, example: Mapping[str, Any]) -> float:
    """1 when the example's `reference` appears in the completion, else 0."""
    return 1.0 if str(_field(example, "reference")).strip() in completion else 0.0


#: The time bound of one `regex` match when no run set one (`match_time_limit`).
REGEX_TIMEOUT_S = 30.0
_limit = threading.local()


def match_time_limit(seconds: float) -> None:
    """Bound each `regex` match of this thread to `seconds` (the run's ``--reward-timeout``)."""
    _limit.seconds = seconds


def regex(completion: str, example: Mapping[str, Any]) -> float:
    """1 when the example's `pattern` (a Python regular expression) matches somewhere in the completion.

    Matched by the `regex` engine (a dependency of transformers, so present wherever a
    run trains), not `re`: Python's `re` holds the GIL for the whole match, so a pattern
    that backtracks without end (``(.|.)*(.|.)*(.|.)*QQQ``) would stop every thread of
    the job, the grader's time limit and `runs stop` included. `regex` releases the GIL
    (``concurrent=True``) and gives up after the time limit, which fails the run naming
    the grader and the example.
    """
    import regex as engine

    pattern = str(_field(example, "pattern"))
    seconds = getattr(_limit, "seconds", REGEX_TIMEOUT_S)
    try:
        found = engine.search(pattern, completion, concurrent=True, timeout=seconds)
    except TimeoutError:
        raise TimeoutError(
            f"the pattern {pattern[:80]!r} ran past {seconds:g} s on a completion of {len(completion)} characters"
        ) from None
    return 1.0 if found else 0.0


def json_valid(completion: str, example: Mapping[str, Any]) -> float:
    """1 when the completion parses as JSON, else 0."""
    try:
        json.loads(completion)
    except ValueError:
        return 0.0
    return 1.0


def length_penalty(completion: str, example: Mapping[str, Any]) -> float:
    """0 for an empty completion down to -1 at the example's `max_chars` (default 200) and beyond."""
    limit = float(example.get("max_chars") or 200)
    return -min(1.0, len(completion) / limit)


def tool_calls(completion: str, example: Mapping[str, Any]) -> float:
    """1 when the completion's calls are the example's `tool_calls` (functions and arguments, any order);
    0.5 when it calls the same functions with other arguments; else 0.

    The model's calls are read by the GRPO run from its raw output in the run's chat format
    (Gemma 4's call tokens, Gemma 3's fenced JSON) and handed over as the reserved field
    ``_tool_calls``; the reference is OpenAI's form (``{"function": {"name", "arguments"}}``,
    arguments as an object or a JSON string) or the bare ``{"name", "arguments"}``.
    """
    from trainkit_core.models.tool_syntax import arguments_of, call_key, function_of

    made = [(c["name"], c["arguments"]) for c in _field(example, "_tool_calls")]
    reference = _field(example, "tool_calls")
    if not isinstance(reference, list):
        raise KeyError("the example's 'tool_calls' field is not a list of calls")
    wanted = [(function_of(c)["name"], arguments_of(c)) for c in reference]
    if sorted(call_key(*c) for c in made) == sorted(call_key(*c) for c in wanted):
        return 1.0
    if made and sorted(name for name, _ in made) == sorted(name for name, _ in wanted):
        return 0.5
    return 0.0


BUILTIN_GRADERS: dict[str, Grader] = {
    "exact_match": exact_match,
    "contains": contains,
    "regex": regex,
    "json_valid": json_valid,
    "length_penalty": length_penalty,
    "tool_calls": tool_calls,
}
