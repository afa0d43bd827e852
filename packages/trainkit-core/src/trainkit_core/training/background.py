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

Progress events go through `trainkit_core.event_batch.EventBatcher`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from trainkit_core.events import StopFlag

log = logging.getLogger(__name__)


class StopWatcher:
    """Polls a `StopFlag` in the background; `is_set()` answers from memory."""

    def __init__(self, flag: StopFlag, *, poll_s: float = 0.2) -> None:
        self.flag = flag
        self.poll_s = poll_s
        self._seen = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> StopWatcher:
        self._thread = threading.Thread(target=self._run, name="trainkit-stop-watcher", daemon=True)
        self._thread.start()
        return self

    def is_set(self) -> bool:
        return self._seen.is_set()

    def check_now(self) -> bool:
        """Read the flag in this thread (at the start and the end, when waiting is fine)."""
        if not self._seen.is_set() and self.flag.is_set():
            self._seen.set()
        return self._seen.is_set()

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._closed.is_set() and not self._seen.is_set():
            try:
                self.check_now()
            except Exception as exc:  # the store cannot answer now: ask again next round
                log.warning("could not read the stop flag: %s", exc)
            self._closed.wait(self.poll_s)


class RecordSaver:
    """Calls `save` in the background when asked, at most once every `interval_s`.

    `save` takes its copy of the record under the caller's lock and writes it
    outside, so the step waits for the copy at most, never for the store.
    """

    def __init__(self, save: Callable[[], Any], *, interval_s: float = 5.0) -> None:
        self._save = save
        self.interval_s = interval_s
        self._due = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> RecordSaver:
        self._thread = threading.Thread(target=self._run, name="trainkit-record-saver", daemon=True)
        self._thread.start()
        return self

    def request(self) -> None:
        """Ask for a save (at most one per interval happens)."""
        self._due.set()

    def close(self) -> None:
        self._closed.set()
        self._due.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._closed.is_set():
            self._due.wait()
            if self._closed.is_set():
                return
            self._due.clear()
            try:
                self._save()
            except Exception as exc:  # the next save carries the same state
                log.warning("could not save the run record: %s", exc)
            self._closed.wait(self.interval_s)
