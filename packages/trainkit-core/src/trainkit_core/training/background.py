"""The training callback's store work, off the training step's path.

A training step must not wait for the key-value store: on Modal every read or write
is a network round trip, and a slow or struggling store would slow every step.
So the step only touches memory:

- `StopWatcher` reads the run's stop flag in a background thread every `poll_s`
  and keeps the answer in a `threading.Event`; the step reads the event. A stop lands
  at the first step that ends after the flag was seen: within `poll_s` plus one store
  read of the request.
- `RecordSaver` writes the run's record from a background thread every
  `interval_s` (a copy taken under the caller's lock, so the step never waits for
  the write, only for the copy).

Progress events go through `trainkit_core.runs.event_batch.EventBatcher`.

The rest of the job keeps off the store's path the same way: `JobWrites` attaches,
for the whole `train` job, a `RecordWriter` (each `TrainingRun.save` queues a copy of
the record; a thread writes the newest, its index entry first) and an `EventBatcher`
(events written in blocks). Phase changes, sample generations and the end's record
then cost the job a copy in memory, and the store's round trips overlap the work
that follows (loading the model, tokenizing, training). `JobWrites.close` waits for
every write, so a job that returns or raises has left its record and events in the
store; a crash loses at most what was queued in its last fraction of a second.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from trainkit_core.runs.event_batch import EventBatcher
from trainkit_core.runs.events import StopFlag
from trainkit_core.toolkit.background import BackgroundWorker

log = logging.getLogger(__name__)


class StopWatcher(BackgroundWorker):
    """Polls a `StopFlag` in the background; `is_set()` answers from memory."""

    def __init__(self, flag: StopFlag, *, poll_s: float = 0.2) -> None:
        super().__init__("trainkit-stop-watcher")
        self.flag = flag
        self.poll_s = poll_s
        self._seen = threading.Event()

    def is_set(self) -> bool:
        return self._seen.is_set()

    def check_now(self) -> bool:
        """Read the flag in this thread (at the start and the end, when waiting is fine)."""
        if not self._seen.is_set() and self.flag.is_set():
            self._seen.set()
        return self._seen.is_set()

    def _run(self) -> None:
        while not self._closed.is_set() and not self._seen.is_set():
            try:
                self.check_now()
            except Exception as exc:  # the store cannot answer now: ask again next round
                log.warning("could not read the stop flag: %s", exc)
            self._closed.wait(self.poll_s)


class RecordSaver(BackgroundWorker):
    """Calls `save` in the background when asked, at most once every `interval_s`.

    `save` takes its copy of the record under the caller's lock and writes it
    outside, so the step waits for the copy at most, never for the store.
    """

    def __init__(self, save: Callable[[], Any], *, interval_s: float = 5.0) -> None:
        super().__init__("trainkit-record-saver")
        self._save = save
        self.interval_s = interval_s

    def request(self) -> None:
        """Ask for a save (at most one per interval happens)."""
        self._wake.set()

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait()
            if self._closed.is_set():
                return
            self._wake.clear()
            try:
                self._save()
            except Exception as exc:  # the next save carries the same state
                log.warning("could not save the run record: %s", exc)
            self._closed.wait(self.interval_s)


class RecordWriter(BackgroundWorker):
    """Writes a run's record from a background thread; of the copies queued meanwhile, the newest.

    `submit(snapshot)` takes the copy under the writer's lock, so copies are queued in
    the order they were taken and an older copy never lands after a newer one (two
    threads save the record during training: the step's checkpoints and the
    `RecordSaver`). A write that fails is tried again after `retry_s`, unless a
    newer copy came meanwhile; `close` writes what is left in the caller's thread and
    raises if the store still refuses.
    """

    def __init__(self, write: Callable[[dict[str, Any]], None], *, retry_s: float = 0.5) -> None:
        super().__init__("trainkit-record-writer")
        self._write = write
        self.retry_s = retry_s
        self._pending: dict[str, Any] | None = None
        self._lock = threading.Lock()  # guards `_pending`; copies are taken under it
        self._write_lock = threading.Lock()  # one write in flight: copies land in order

    def submit(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        """Queue the copy `snapshot()` takes (replacing an older one not written yet)."""
        with self._lock:
            self._pending = snapshot()
        self._wake.set()

    def flush(self) -> None:
        """Write the queued copy now, in this thread."""
        with self._write_lock:
            with self._lock:
                data, self._pending = self._pending, None
            if data is None:
                return
            try:
                self._write(data)
            except BaseException:
                with self._lock:
                    if self._pending is None:  # unless a newer copy came meanwhile
                        self._pending = data
                raise

    def _finish(self) -> None:
        self.flush()  # what is left, in the caller's thread: a refusal raises there

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._closed.is_set():
                return  # `close` writes the rest
            try:
                self.flush()
            except Exception as exc:  # a store hiccup: the copy stays queued
                log.warning("could not save the run record: %s", exc)
                self._closed.wait(self.retry_s)
                self._wake.set()


class JobWrites:
    """The job's record saves and events, written in the background until `close`.

    While attached, `run.save()` queues a copy for a `RecordWriter` and
    `run.events.append` queues the event for an `EventBatcher`. The training
    callback (`trainkit_core.training.progress.Reporter`) uses the batcher it finds
    attached instead of starting its own.
    """

    def __init__(self, run: Any, *, event_interval_s: float = 0.25) -> None:
        self.run = run
        self.records = RecordWriter(run.write_record)
        self.events = EventBatcher(run.events, interval_s=event_interval_s)

    def start(self) -> JobWrites:
        self.records.start()
        self.events.start()
        self.run.route_saves(self.records)
        return self

    def close(self) -> None:
        """Detach, and wait until every queued record copy and event is written (safe to repeat)."""
        if self.run.writer is self.records:
            self.run.route_saves(None)
        try:
            self.events.close()
        finally:
            self.records.close()
