"""What a client does with a run once it started: wait for it, take its result, stop, cancel or release it.

The record's fields and its store operations are `TrainingRun`'s; this mixin holds the
run's lifecycle as a client sees it, so that one reads apart from the other. Every
method reads the record anew where the answer depends on it (`reload`), and asks the
provider only through the run's store (`RunStore.provider`): inside a job, where there
is no provider, only the record is read.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict

from trainkit_core.errors import ConflictError, JobTimeout, NotFoundError
from trainkit_core.runs.statuses import TERMINAL_STATUSES
from trainkit_core.toolkit.aio import BlockingAndAsync, aio_method

if TYPE_CHECKING:
    from typing_extensions import Self

    from trainkit_core.runs.events import EventLog
    from trainkit_core.runs.training_run import RunStore, TrainingRun

#: Seconds a finished run's job call gets to end on its own before `release` ends it.
RELEASE_GRACE_S = 30.0


class RunLifecycle(BaseModel):
    """A run's waits and ends, as a client drives them; no field of its own (`TrainingRun` has them)."""

    model_config = ConfigDict(ignored_types=(BlockingAndAsync,))

    if TYPE_CHECKING:
        id: str
        status: str
        ended_at: float | None
        updated_at: float
        error_message: str | None
        stop_reason: str | None
        call_id: str
        _store: RunStore | None

        @property
        def store(self) -> RunStore: ...
        @property
        def events(self) -> EventLog: ...
        def reload(self) -> Any: ...
        def save(self) -> Any: ...
        def end_attempt(self, now: float) -> None: ...

    def ended(self) -> bool:
        """True once the record says the run ended (a terminal status); asks no provider."""
        return self.status in TERMINAL_STATUSES

    def done(self) -> bool:
        """True once the run ended, or its job's call has finished (the seed's `done`).

        A run whose call finished while its record still says it runs (the job died
        before it could write its end) is reconciled first (`reconcile_run`), so that a
        True here is never read beside a `running` status (nor a False beside a finished
        call). Inside a job (no provider) only the record is read. Does not stop anything.
        """
        if self.ended():
            return True
        if self._store is None or self.store.provider is None:
            return False
        from trainkit_core.runs.reconcile import reconcile_run

        reconcile_run(cast("TrainingRun", self))  # ends the record when the provider says the call finished
        return self.ended()

    @aio_method
    def wait(self, *, timeout: float | None = None, poll_s: float = 0.5) -> Self:
        """Block until the run is done. Does not stop it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.reload()
            if self.done():
                return self
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeout(f"run {self.id} still {self.status} after {timeout:g} s")
            time.sleep(poll_s)

    @aio_method
    def result(self, *, timeout: float | None = None, stop_app_on_success: bool = True) -> Self:
        """Wait, then raise `JobError` when the run did not succeed.

        With `stop_app_on_success`, a run that succeeded releases what it holds on the
        provider (`release`): its job call, when that is still alive.
        """
        from trainkit_core.errors import JobError

        self.wait(timeout=timeout)
        if self.status != "succeeded":
            raise JobError(f"run {self.id} ended {self.status}: {self.error_message or 'no error text'}")
        if stop_app_on_success:
            self.release()
        return self

    def release(self) -> bool:
        """End the run's job call when the run has ended but the call still lives; True when it did.

        The seed's run had an app of its own to stop; a trainkit run shares its
        provider's deployed app with other runs, so what it holds of its own is its
        job call (a container or a process finishing up). The shared app is never
        stopped here (``trainkit app stop`` does that). A job writes its history after
        the record says it ended, so a call is left `RELEASE_GRACE_S` after the end to
        finish on its own before it is cancelled. Safe to call more than once.
        """
        if not self.ended() or self.store.provider is None or not self.call_id:
            return False
        call = self.store.provider.call(self.call_id)
        ended = self.ended_at or self.updated_at
        try:
            while not call.status().done:
                if time.time() - ended >= RELEASE_GRACE_S:
                    call.cancel()
                    return True
                time.sleep(0.5)
        except NotFoundError:
            return False
        return False

    def stop(self, reason: str = "stop requested") -> None:
        """Ask the run to stop gracefully (it saves its adapter and ends `stopped`). Safe to repeat."""
        if self.ended():
            return
        self.store.stop_flag(self.id).request(reason)
        self.events.append("log", message=reason)

    def cancel(self) -> None:
        """End the run's job now, without saving: the run ends `stopped` with a note.

        A job that cannot be reached is not reported cancelled: `ConflictError` while
        no call id is known yet (its submitter died before saving it, and the job has
        not started), so the caller retries or stops the run instead.
        """
        self.reload()
        if self.ended():
            raise ConflictError(f"run {self.id} already ended {self.status}")
        if self.store.provider is not None:
            if not self.call_id:
                raise ConflictError(
                    f"run {self.id} has no job id recorded yet, so its job cannot be reached to cancel it",
                    hint=f"try again once it is running, or stop it gracefully: trainkit runs stop {self.id}",
                )
            self.store.provider.call(self.call_id).cancel()
        self.reload()
        if not self.ended():
            now = time.time()
            self.end_attempt(now)
            self.status, self.ended_at, self.updated_at = "stopped", now, now
            self.error_message = "cancelled: the job was ended without saving"
            self.stop_reason = "cancelled"
            self.save()
            self.events.append("status", status="stopped", reason="cancelled")

    @property
    def call(self) -> Any:
        """The provider's handle of this run's job call (client side only); None before it started."""
        if self.store.provider is None or not self.call_id:
            return None
        return self.store.provider.call(self.call_id)
