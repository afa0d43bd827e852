"""A run's event log on the provider's key-value store.

Events are numbered 1, 2, 3… per run; a reader asks for everything after the last
number it saw, which is how the CLI follows a run and how the API resumes a
server-sent-event stream from `Last-Event-ID`. No heavy imports: the training
callback and the API both use this module.

Layout in the ``events`` namespace: ``<run id>/<seq, 10 digits>`` holds one event,
``<run id>/last`` the highest number written. Both writes are idempotent, so a
reader never needs to scan keys (a Modal Dict cannot list by prefix cheaply).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from trainkit_core.hookspecs import KVStore

EVENTS_NAMESPACE = "events"
CONTROL_NAMESPACE = "control"

#: Event types. `progress` carries step, loss, learning_rate, grad_norm, epoch,
#: tokens_per_s, eta_s, memory_mb; `phase` and `status` carry the new value.
EVENT_TYPES = ("progress", "phase", "status", "log", "warning", "checkpoint", "metrics", "rollout", "eval")


def _key(run_id: str, seq: int) -> str:
    return f"{run_id}/{seq:010d}"


class EventLog:
    """Append and read the events of one run."""

    def __init__(self, kv: KVStore, run_id: str) -> None:
        self.kv = kv
        self.run_id = run_id
        self._last: int | None = None

    def last_seq(self) -> int:
        return int(self.kv.get(f"{self.run_id}/last", 0))

    def append(self, type: str, **data: Any) -> int:
        """Write one event; returns its sequence number."""
        if type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type!r}")
        seq = (self._last if self._last is not None else self.last_seq()) + 1
        event = {"seq": seq, "time": time.time(), "type": type, **data}
        while not self.kv.put_if_absent(_key(self.run_id, seq), event):
            seq += 1  # another writer took this number
            event["seq"] = seq
        self._last = seq
        if seq > self.last_seq():
            self.kv.put(f"{self.run_id}/last", seq)
        return seq

    def read(self, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Events with a sequence number above `after`, in order."""
        last = self.last_seq()
        events: list[dict[str, Any]] = []
        seq = max(0, int(after))
        while seq < last and (limit is None or len(events) < limit):
            seq += 1
            event = self.kv.get(_key(self.run_id, seq))
            if event is not None:
                events.append(event)
        return events

    def delete(self) -> None:
        for key in self.kv.keys(f"{self.run_id}/"):
            self.kv.delete(key)


def follow(
    log: EventLog,
    *,
    after: int = 0,
    is_done: Callable[[], bool],
    poll_s: float = 0.5,
    timeout: float | None = None,
) -> Any:
    """Yield events as they are written, until `is_done()` and nothing is left to read."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        done = is_done()  # asked before reading, so the last events are not missed
        events = log.read(after)
        yield from events
        if events:
            after = events[-1]["seq"]
        elif done:
            return
        if deadline is not None and time.monotonic() > deadline:
            return
        if not events:
            time.sleep(poll_s)


class StopFlag:
    """The graceful-stop request of a run, checked by the training callback every step."""

    def __init__(self, kv: KVStore, run_id: str) -> None:
        self.kv = kv
        self.key = f"{run_id}/stop"

    def request(self, reason: str = "stop requested") -> None:
        self.kv.put(self.key, {"requested_at": time.time(), "reason": reason})

    def is_set(self) -> bool:
        return self.kv.get(self.key) is not None

    def clear(self) -> None:
        self.kv.delete(self.key)
