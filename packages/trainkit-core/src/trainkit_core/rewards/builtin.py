"""The built-in graders. Each is ``grade(completion, example) -> float``.

`example` is the prompt's line of the dataset: its `messages` and every other field
the line carries (``reference``, ``pattern``, ``max_chars``...). A grader needing a field
the line lacks raises `KeyError` naming it, which fails the run naming the grader and
the example (never a silent zero).
"""

from __future__ import annotations

import json
import re
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


def regex(completion: str, example: Mapping[str, Any]) -> float:
    """1 when the example's `pattern` (a Python regular expression) matches somewhere in the completion."""
    return 1.0 if re.search(str(_field(example, "pattern")), completion) else 0.0


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


BUILTIN_GRADERS: dict[str, Grader] = {
    "exact_match": exact_match,
    "contains": contains,
    "regex": regex,
    "json_valid": json_valid,
    "length_penalty": length_penalty,
}
