"""A run's `metadata`: free-form JSON the caller stores on the run, within limits.

Every listing of runs returns each run's metadata, so it must stay small, and it is
saved as JSON, so it must be JSON that round-trips: `check_metadata` refuses

- nesting deeper than `MAX_DEPTH` (a few hundred levels crashed the save with a
  `RecursionError`);
- more than `MAX_BYTES` as compact JSON (10 MB was stored, then sent back with every
  ``GET /v1/runs``);
- NaN and infinities (JSON has none; they were stored as ``null`` without a word);
- values that are not JSON at all (sets, bytes, objects) and keys that are not strings.

Problems name the place (``metadata.a.b[2]``), so the API's 422 and the CLI's message
point at it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from trainkit_core.errors import UsageError

#: Deepest nesting accepted below `metadata` itself (`{"a": {"b": 1}}` has depth 2).
MAX_DEPTH = 8
#: Largest size of the metadata as compact JSON, in bytes.
MAX_BYTES = 16 * 1024


def check_metadata(value: Any, *, field: str = "metadata") -> dict[str, Any]:
    """`value` when it is acceptable metadata (see the module docstring); `UsageError` naming the place."""
    if not isinstance(value, dict):
        raise UsageError(f"{field} must be a JSON object")
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, dict):
            if depth > MAX_DEPTH:
                raise UsageError(f"{where}: nested deeper than {MAX_DEPTH} levels")
            for key, child in item.items():
                if not isinstance(key, str):
                    raise UsageError(f"{where}: keys must be strings")
                stack.append((child, f"{where}.{key[:40]}", depth + 1))
        elif isinstance(item, list):
            if depth > MAX_DEPTH:
                raise UsageError(f"{where}: nested deeper than {MAX_DEPTH} levels")
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise UsageError(f"{where}: {item} is not a JSON number (no NaN or infinity)")
        elif not (item is None or isinstance(item, (str, int))):
            raise UsageError(f"{where}: {type(item).__name__} is not a JSON value")
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise UsageError(f"{field}: {size} bytes as JSON, over the limit of {MAX_BYTES}")
    return value
