"""Server-sent events: the wire format, and a run's event log as a stream.

Each event of the log goes out with ``id:`` set to its sequence number, so a client
that reconnects with ``Last-Event-ID: N`` (browsers do this by themselves) gets the
events after N: exactly what it missed, nothing twice. The stream ends with an
``end`` event once the run has ended and every event is sent. Reads of the store run
in a worker thread so a slow store never blocks the server's event loop.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio

from trainkit_core.runs.events import EventLog

if TYPE_CHECKING:
    from trainkit_api.state import HistoryLog

#: How often the log is read while nothing new comes.
POLL_S = 0.5
#: A comment line this often keeps proxies from closing a quiet stream.
KEEPALIVE_S = 15.0
#: How often an unfinished run is reconciled while streaming (its job may have died).
RECONCILE_S = 5.0

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def format_event(data: Any, *, event: str | None = None, id: int | str | None = None) -> str:
    """One event in the `text/event-stream` format. `data` is sent as one JSON line."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.append("data: " + (data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))))
    return "\n".join(lines) + "\n\n"


#: A sequence number as it may be written: ASCII digits only, at most 16 of them.
#: (`str.isdigit()` also accepts superscripts and other scripts' digits, which `int()`
#: then refuses: the check must be exactly this.)
SEQ_PATTERN = r"^[0-9]{1,16}$"
_SEQ = re.compile(SEQ_PATTERN)


def parse_seq(value: object) -> int:
    """A sequence number from text or an int; `ValueError` for anything but 0-9 digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _SEQ.fullmatch(value.strip(" \t")):
        return int(value.strip(" \t"))
    raise ValueError("a sequence number is written with the digits 0-9 only (at most 16)")


def parse_last_event_id(value: str | None) -> int | None:
    """The sequence number a reconnecting client saw last; None when absent; `ValueError` when malformed."""
    if value is None or not value.strip(" \t"):
        return None
    return parse_seq(value)


async def run_event_stream(
    log: EventLog | HistoryLog,
    *,
    after: int,
    is_done: Callable[[], bool],
    final: Callable[[], dict[str, Any]],
    poll_s: float = POLL_S,
) -> AsyncIterator[str]:
    """Yield the run's events after `after` as they are written, then an `end` event."""
    quiet_since = time.monotonic()
    yield "retry: 2000\n\n"
    while True:
        done = await anyio.to_thread.run_sync(is_done)  # asked before reading: the last events are not missed
        events = await anyio.to_thread.run_sync(log.read, after)
        for event in events:
            yield format_event(event, event=str(event.get("type", "message")), id=event["seq"])
        if events:
            after = events[-1]["seq"]
            quiet_since = time.monotonic()
            continue
        if done:
            yield format_event(await anyio.to_thread.run_sync(final), event="end")
            return
        if time.monotonic() - quiet_since > KEEPALIVE_S:
            yield ": keep-alive\n\n"
            quiet_since = time.monotonic()
        await anyio.sleep(poll_s)
