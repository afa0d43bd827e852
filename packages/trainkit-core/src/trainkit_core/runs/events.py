"""A run's event log on the provider's key-value store.

Events are numbered 1, 2, 3… per run; a reader asks for everything after the last
number it saw, which is how the CLI follows a run and how the API resumes a
server-sent-event stream from `Last-Event-ID`. No heavy imports: the training
callback and the API both use this module.

Layout in the ``events`` namespace: ``<run id>/<seq, 10 digits>`` holds one event,
``<run id>/last`` the highest number written (a hint: readers look past it). A reader
never needs to scan keys (a Modal Dict cannot list by prefix cheaply). Events written
together share two store calls (see `EventLog`); the training callback batches its
events in the background (`trainkit_core.runs.event_batch`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from trainkit_core.plugins.hookspecs import KVStore
from trainkit_core.toolkit.kv_values import get_many, put_many

EVENTS_NAMESPACE = "events"
CONTROL_NAMESPACE = "control"

#: Event types. `progress` carries step, loss, learning_rate, grad_norm, epoch,
#: tokens_per_s, eta_s, memory_mb; `phase` and `status` carry the new value.
EVENT_TYPES = ("progress", "phase", "status", "log", "warning", "checkpoint", "metrics", "rollout", "eval")


def _key(run_id: str, seq: int) -> str:
    return f"{run_id}/{seq:010d}"


#: A batch whose first event is older than this and still misses later ones was cut
#: short by a crashed writer; readers skip the hole instead of waiting for it.
HOLE_GRACE_S = 30.0

#: Events a lazy ``last`` hint may lag behind (`EventLog.lazy_hint`): what a reader
#: then reads one at a time.
HINT_LAG = 8

#: Events read in one `get_many` call (one query on the local store).
READ_CHUNK = 500


class EventLog:
    """Append and read the events of one run.

    Several events written together form a *block*: its first event is written with
    `put_if_absent` (which claims the sequence number) and carries ``_span``, the
    number of events in the block; the others, and ``last``, follow in one
    `put_many` call (one SQLite transaction, one ``Dict.update``). Two calls for any
    number of events. A writer that loses the claim reads the block in the way and
    tries after it, so two writers never share a number. Readers strip ``_span``.
    """

    def __init__(self, kv: KVStore, run_id: str, *, history: Callable[[], list[dict[str, Any]]] | None = None) -> None:
        self.kv = kv
        self.run_id = run_id
        #: The durable copy of the events (the run's ``events.jsonl`` on the models volume),
        #: read when the KV holds none: Modal drops a Dict entry idle for 7 days.
        self._history = history
        self._last: int | None = None
        self._lock = threading.Lock()
        #: When set, a block of one event does not also write ``last`` (a hint readers
        #: look past), until `HINT_LAG` events went without it: one store call per
        #: event, not two. The job sets it for its run's log (`trainkit_core.training.job`):
        #: a crash loses no event, only the hint, and a reader reads at most `HINT_LAG`
        #: events one at a time.
        self.lazy_hint = False
        self._hint_written = 0
        self.batcher: Any = None  # an `EventBatcher` while one is attached (`trainkit_core.runs.event_batch`)

    def last_seq(self) -> int:
        """The highest number written (``last`` is a hint written after the events: look past it)."""
        seq = int(self.kv.get(f"{self.run_id}/last", 0))
        while True:
            event = self.kv.get(_key(self.run_id, seq + 1))
            if event is None:
                return seq
            seq += max(1, int(event.get("_span", 1)))

    def append(self, type: str, **data: Any) -> int:
        """Write one event; returns its sequence number (0 while a batcher holds it)."""
        if type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type!r}")
        batcher = self.batcher
        if batcher is not None:
            batcher.add({"time": time.time(), "type": type, **data})
            return 0
        return self.write([{"time": time.time(), "type": type, **data}])[0]

    def write(self, events: list[dict[str, Any]]) -> list[int]:
        """Write events (each with its ``type`` and ``time``) as one block; their sequence numbers."""
        if not events:
            return []
        for event in events:
            if event.get("type") not in EVENT_TYPES:
                raise ValueError(f"unknown event type {event.get('type')!r}")
        with self._lock:
            span = len(events)
            seq = (self._last if self._last is not None else self.last_seq()) + 1
            while True:
                first = {**events[0], "seq": seq, **({"_span": span} if span > 1 else {})}
                if self.kv.put_if_absent(_key(self.run_id, seq), first):
                    break
                taken = self.kv.get(_key(self.run_id, seq))  # another writer's block: skip past it
                seq += max(1, int((taken or {}).get("_span", 1)))
            rest = {_key(self.run_id, seq + i): {**event, "seq": seq + i} for i, event in enumerate(events) if i}
            self._last = seq + span - 1
            if rest or not self.lazy_hint or self._last - self._hint_written >= HINT_LAG:
                put_many(self.kv, {**rest, f"{self.run_id}/last": self._last})
                self._hint_written = self._last
            return list(range(seq, seq + span))

    def read(self, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Events with a sequence number above `after`, in order (this process's held ones written first)."""
        if self.batcher is not None:
            self.batcher.flush()
        last = max(int(self.kv.get(f"{self.run_id}/last", 0)), self._last or 0)  # this process's own, if later
        events: list[dict[str, Any]] = []
        seq = max(0, int(after))
        block_end, block_time = 0, 0.0  # the block being read: its last number, its first event's time
        fetched: dict[str, Any] = {}
        fetched_to = seq  # events up to `last` are read ahead in chunks (one query on SQLite)
        while limit is None or len(events) < limit:
            seq += 1
            if seq <= last:
                if seq > fetched_to:
                    wanted = READ_CHUNK if limit is None else min(READ_CHUNK, limit - len(events))
                    fetched_to = min(last, seq + wanted - 1)
                    fetched = get_many(self.kv, [_key(self.run_id, s) for s in range(seq, fetched_to + 1)])
                event = fetched.get(_key(self.run_id, seq))
            else:
                event = self.kv.get(_key(self.run_id, seq))
            if event is None:
                if seq <= block_end and time.time() - block_time < HOLE_GRACE_S:
                    break  # the rest of this block is being written: read it next time
                if seq <= max(last, block_end):
                    continue  # a hole (a writer died mid-block, or an older log's gap)
                break
            span = int(event.pop("_span", 1))
            if span > 1:
                block_end, block_time = seq + span - 1, float(event.get("time") or 0.0)
            events.append(event)
        if not events and last == 0 and self._history is not None:
            kept = [e for e in self._history() if int(e.get("seq") or 0) > int(after)]
            return kept if limit is None else kept[:limit]
        return events

    def delete(self) -> None:
        for key in self.kv.keys(f"{self.run_id}/"):
            self.kv.delete(key)


#: Seconds after a run's end that a follower stops waiting for the run's last event.
ENDED_GRACE_S = 15.0


def all_written(ended: bool, ended_at: float | None, log: Any, grace_s: float = ENDED_GRACE_S) -> bool:
    """Whether a follower of an ended run has every event: the log ends with its terminal status event.

    The job saves the ended record before its last events reach the store (a background
    batcher writes them: the final metrics, the phase, the status event, last), so "the
    record says ended" alone ends a stream a few events short. A run ended by someone other
    than its job (the reconciler, a cancel) may write no such event: after `grace_s` the
    record's end is enough.
    """
    from trainkit_core.runs.statuses import TERMINAL_STATUSES

    if not ended:
        return False
    last = log.last_seq()
    tail = log.read(last - 1, limit=1) if last else []
    if tail and tail[-1].get("type") == "status" and tail[-1].get("status") in TERMINAL_STATUSES:
        return True
    return time.time() - (ended_at or 0.0) > grace_s


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

    def read(self) -> dict[str, Any] | None:
        """The request (requested_at, reason), or None when no stop was asked."""
        value = self.kv.get(self.key)
        return value if isinstance(value, dict) else None

    def clear(self) -> None:
        self.kv.delete(self.key)
