"""Events written in the background, several per store call, so a slow store never slows a step.

`EventBatcher` attaches to an `EventLog`: while attached, `EventLog.append` only
queues the event (microseconds) and a background thread writes what has queued as one
block (`EventLog.write`: two store calls for any number of events) every
`interval_s`, or sooner when `max_batch` events wait. What a crash can lose is
bounded by the interval (a quarter of a second by default); `flush()` writes now
and `close()` (on the end of training, a stop, an exception) writes everything left.
Reading the log through the same `EventLog` flushes first, so a process always reads
its own events.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from trainkit_core.runs.events import EventLog
from trainkit_core.toolkit.background import BackgroundWorker

log = logging.getLogger(__name__)


class EventBatcher(BackgroundWorker):
    """Queue the events of one `EventLog` and write them in blocks from a background thread."""

    def __init__(self, events: EventLog, *, interval_s: float = 0.25, max_batch: int = 256) -> None:
        super().__init__(f"trainkit-events-{events.run_id}")
        self.events = events
        self.interval_s = interval_s
        self.max_batch = max_batch
        self._queue: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # guards the queue
        self._write_lock = threading.Lock()  # one block in flight at a time: numbers stay in order
        self.error: BaseException | None = None

    def __enter__(self) -> EventBatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> EventBatcher:
        """Attach to the log and start the writer thread."""
        self.events.batcher = self
        return super().start()

    def add(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._queue.append(event)
            # Woken once, when the queue reaches a full block: setting the event on every
            # later add while the writer is busy cost a sixth of the time per event.
            full = len(self._queue) == self.max_batch
        if full:
            self._wake.set()

    def flush_soon(self) -> None:
        """Have the background thread write what is queued now, without waiting for it."""
        self._wake.set()

    def flush(self) -> None:
        """Write every queued event now, in this thread."""
        with self._write_lock:
            with self._lock:
                batch, self._queue = self._queue, []
            if not batch:
                return
            try:
                self.events.write(batch)
            except BaseException:
                with self._lock:
                    self._queue[:0] = batch  # kept for the next try (a half-written block repeats its first)
                raise

    def _finish(self) -> None:
        """Detach, and write what is left (`close` is safe to repeat)."""
        if self.events.batcher is self:
            self.events.batcher = None
        self.flush()

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            try:
                self.flush()
            except Exception as exc:  # a store hiccup: the events stay queued for the next round
                self.error = exc
                log.warning("could not write events of run %s: %s", self.events.run_id, exc)
