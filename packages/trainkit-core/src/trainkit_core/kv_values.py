"""The key and value rules every `KVStore` follows, for provider authors to reuse.

Keys are non-empty strings; values are stored as compact JSON, NaN and infinities
refused, so that every provider round-trips the same values (the conformance suite
checks it).
"""

from __future__ import annotations

import json
from typing import Any

from trainkit_core.errors import UsageError


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise UsageError(f"key must be a non-empty string, got {key!r}")
    return key


def dump_value(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"value is not JSON-serialisable: {exc}") from None
