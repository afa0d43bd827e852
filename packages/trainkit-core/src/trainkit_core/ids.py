"""Identifiers users see and type: run ids, and the names of datasets and eval sets."""

from __future__ import annotations

import re
import secrets
import time

from trainkit_core.errors import UsageError

#: ASCII digits only (`\d` would take any script's digits), and checked with `fullmatch`
#: (`$` alone also matches before a final newline, so "a\n" would pass).
RUN_ID_PATTERN = re.compile(r"^run-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def new_stamped_id(prefix: str, now: float | None = None) -> str:
    """`<prefix>-YYYYMMDD-HHMMSS-xxxxxx` (UTC): sorts by creation time, readable in a listing."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


def new_run_id(now: float | None = None) -> str:
    return new_stamped_id("run", now)


def check_run_id(value: str) -> str:
    if not isinstance(value, str) or not RUN_ID_PATTERN.fullmatch(value):
        raise UsageError(f"{value!r} is not a run id (expected run-YYYYMMDD-HHMMSS-xxxxxx)")
    return value


def check_name(value: str, *, what: str = "name") -> str:
    """Dataset and eval-set names: lower-case letters, digits, '-' and '_', up to 64."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise UsageError(
            f"{what} {value!r} is invalid: use lower-case letters, digits, '-' and '_' (at most 64, starting with a letter or digit)"
        )
    return value
