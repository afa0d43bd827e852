"""Strict JSON (RFC 8259) for what users hand to trainkit: dataset lines, eval files, messages.

Python's `json` accepts more than the RFC allows, and what it accepts beyond it either
changes meaning silently or fails later with a traceback:

- ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON at all), and numbers such as
  ``1e400`` that overflow to infinity;
- integers of thousands of digits (Python refuses them with a `ValueError` that is
  not a `JSONDecodeError`, so callers that catch only the latter crash);
- lone UTF-16 surrogates written as ``\\ud800`` escapes (the text cannot be encoded
  as UTF-8 again, so it fails when it is written out or tokenised);
- duplicate keys in one object (the RFC says names SHOULD be unique; Python keeps the
  last, other readers the first, so the file means different things to different
  tools): trainkit refuses them;
- nesting deep enough to exhaust the stack (a `RecursionError`).

`loads` refuses all of these with `StrictJSONError`, which carries the message and,
where known, the 1-based column, so callers can report ``file:line`` (column N).
Nesting is limited to `MAX_DEPTH` levels, far beyond what any trainkit format needs.
"""

from __future__ import annotations

import json
from typing import Any

#: Deepest nesting of arrays and objects accepted (a chat example needs 3).
MAX_DEPTH = 64
#: Longest integer literal accepted, in digits (Python's own limit is 4300).
MAX_INT_DIGITS = 1000


class StrictJSONError(ValueError):
    """Not strict JSON: `message` says why, `column` (1-based) where, when known."""

    def __init__(self, message: str, column: int | None = None) -> None:
        super().__init__(message if column is None else f"{message} (column {column})")
        self.message = message
        self.column = column


class _Refused(Exception):
    """Raised from the decoder's hooks; turned into `StrictJSONError` by `loads`."""


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"number {text[:40]} is too large for a 64-bit float")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"integer of {len(text)} digits is too long (at most {MAX_INT_DIGITS})")
    return int(text)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refused(f"duplicate key {_short(key)} in one object")
        result[key] = value
    return result


def _short(text: str) -> str:
    shown = text if len(text) <= 40 else text[:40] + "…"
    return json.dumps(shown)


_DECODER = json.JSONDecoder(
    parse_constant=_constant, parse_float=_float, parse_int=_int, object_pairs_hook=_object, strict=True
)


def loads(text: str) -> Any:
    """Parse one JSON text strictly (see the module docstring); `StrictJSONError` otherwise."""
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise StrictJSONError(exc.msg, exc.colno) from None
    except _Refused as exc:
        raise StrictJSONError(str(exc)) from None
    except RecursionError:
        raise StrictJSONError(f"nested too deeply (at most {MAX_DEPTH} levels)") from None
    _check(value)
    return value


def _check(value: Any) -> None:
    """Depth and lone surrogates, walked without recursion (the value may be deep)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise StrictJSONError(f"nested too deeply (at most {MAX_DEPTH} levels)")
            if isinstance(item, dict):
                for key, child in item.items():
                    _check_text(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StrictJSONError(
            f"string holds a lone UTF-16 surrogate \\u{ord(text[exc.start]):04x} (not valid Unicode)"
        ) from None
