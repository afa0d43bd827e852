"""One shape for the job's background threads: started once, woken when there is work, closed once.

The store work of a training job (the stop flag's reads, the record's writes, event
blocks, a sweep budget's reads) happens off the training step's path, each in a daemon
thread of its own with the same lifecycle. `BackgroundWorker` holds that lifecycle, so
each worker says only what its thread does (`_run`) and what is left to do in the
caller's thread once it has stopped (`_finish`: writing what is still queued).
"""

from __future__ import annotations

import threading
from typing import TypeVar

W = TypeVar("W", bound="BackgroundWorker")


class BackgroundWorker:
    """A daemon thread running `_run` from `start` until `close`.

    `_run` loops until `_closed` is set, waiting on `_wake` (set by whoever has work for
    it, and by `close`) or on `_closed` (a poll every so often). `close` is safe to repeat.
    """

    def __init__(self, thread_name: str) -> None:
        self.thread_name = thread_name
        self._closed = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self: W) -> W:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the thread, wait for it, then `_finish` in the caller's thread."""
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._finish()

    def _run(self) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        """What is left once the thread stopped; nothing by default."""
