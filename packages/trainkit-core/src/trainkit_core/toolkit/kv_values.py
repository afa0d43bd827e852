"""The key and value rules every `KVStore` follows, for provider authors to reuse.

Keys are non-empty strings; values are stored as compact JSON, NaN and infinities
refused, so that every provider round-trips the same values (the conformance suite
checks it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from trainkit_core.errors import UsageError


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise UsageError(f"key must be a non-empty string, got {key!r}")
    return key


#: One encoder for every value: `json.dumps` with options builds a new one per call,
#: a cost that shows when thousands of events are written a second.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _c_encoder() -> Any:
    """CPython's C encoder with `_ENCODER`'s options, built once (None where there is none).

    `JSONEncoder.encode` builds this object again on every call: profiled on the event
    path, that was 40 % of encoding a small event. No circular-reference markers (a
    cycle ends in RecursionError, reported like any other unencodable value).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - not CPython
        return None
    return make(None, _ENCODER.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False)


_C_ENCODER = _c_encoder()


def dump_value(value: Any) -> str:
    try:
        if _C_ENCODER is not None and isinstance(value, dict):
            return "".join(_C_ENCODER(value, 0))
        return _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UsageError(f"value is not JSON-serialisable: {exc}") from None


def put_many(kv: Any, items: Mapping[str, Any]) -> None:
    """Write several keys in as few store calls as the store allows.

    `put_many` is optional in the `KVStore` protocol: the local store writes the keys
    in one transaction, the Modal one in one ``Dict.update`` call; a store without it
    gets one `put` per key. Not atomic across keys unless the store says so (SQLite is;
    readers must not rely on it).
    """
    if not items:
        return
    many = getattr(kv, "put_many", None)
    if many is not None:
        many(items)
        return
    for key, value in items.items():
        kv.put(key, value)


def get_many(kv: Any, keys: Iterable[str]) -> dict[str, Any]:
    """The values of several keys (missing ones left out), in as few store calls as it allows.

    `get_many` is optional in the `KVStore` protocol too: the local store answers with
    one query; a store without it gets one `get` per key.
    """
    keys = list(keys)
    many = getattr(kv, "get_many", None)
    if many is not None:
        return many(keys)  # type: ignore[no-any-return]
    found = {}
    for key in keys:
        value = kv.get(key)
        if value is not None:
            found[key] = value
    return found


def get_many_text(kv: Any, keys: Iterable[str]) -> dict[str, str]:
    """The values of several keys as their stored JSON text (missing keys left out).

    For a reader that decodes the text itself, or not at all when it saw the same text
    before (the run listing: `trainkit_core.runs.training_run.RunStore.page_json`). Optional in the
    `KVStore` protocol as well: the local store returns SQLite's text as it is; other
    stores get `get_many` with each value encoded again (the same text, since values
    are stored as compact JSON).
    """
    keys = list(keys)
    many = getattr(kv, "get_many_text", None)
    if many is not None:
        return many(keys)  # type: ignore[no-any-return]
    return {key: dump_value(value) for key, value in get_many(kv, keys).items()}
