"""How a run's record reaches its store: saves, the merge with other writers, shared updates, history.

A run has several writers at once: its job saves progress (through a background
`RecordWriter` while one is attached), the submitter notes the job's call once the
provider started it, and clients add dashboard components. This mixin of `TrainingRun`
is how each write keeps what the others wrote: the index first, then the record under
its lock, merged with the stored copy (`SHARED_FIELDS`, `SUBMITTER_FIELDS`, metadata
keys this handle did not change). Reading a record is `TrainingRun.from_id`'s.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, PrivateAttr

from trainkit_core.errors import TrainkitError
from trainkit_core.runs.paths import history_dir
from trainkit_core.runs.seed_names import restate_seed_names
from trainkit_core.toolkit.aio import BlockingAndAsync, aio_method, in_thread

if TYPE_CHECKING:
    from typing_extensions import Self

    from trainkit_core.runs.training_run import RunStore

log = logging.getLogger(__name__)

#: The run's app, filled from its job's handle where the provider knows it (`RunHandle.app`).
APP_FIELDS = ("provider_app_id", "provider_app_url", "deployment_id")

#: What clients add to a run while its job goes on (`add_dashboard_component`,
#: `record_latest_rollout`). They change only through `update_shared`, on the stored
#: record under its lock; every other save carries them over from the store, so the
#: job's copy of its record, written back at each progress save, never drops them.
SHARED_FIELDS = ("dashboard_components", "latest_rollout")

#: What the submitter writes once the provider started the job (`training.submit`), which
#: the job's own copy of the record may not hold yet.
SUBMITTER_FIELDS = ("call_id", *APP_FIELDS)


class RecordWrites(BaseModel):
    """A run's writes to its store; the fields are `TrainingRun`'s, the write state is here."""

    model_config = ConfigDict(ignored_types=(BlockingAndAsync,))

    if TYPE_CHECKING:
        id: str
        status: str
        updated_at: float

        @property
        def store(self) -> RunStore: ...
        @classmethod
        def from_stored_data(cls, data: object, *, store: RunStore | None = None) -> Self: ...

    #: (status, group) as the index last saw them from this object: `save` writes the
    #: index only when they change, so progress saves cost no index write.
    _indexed: tuple[str, str | None] | None = PrivateAttr(default=None)
    #: The job's background writer of this record while one is attached (`save` queues to it).
    _writer: Any = PrivateAttr(default=None)
    #: The metadata keys as this object last read or wrote them (seed 002's snapshot), or None
    #: for a run never stored: `write_record` merges only what changed since into the stored
    #: record, so two handles of one run never undo each other's keys.
    _metadata_seen: dict[str, Any] | None = PrivateAttr(default=None)

    @aio_method
    def save(self, *, is_async: bool = False) -> Awaitable[None] | None:
        """Write the record; first the index, when the status or group changed (as the index tells them).

        ``await run.save(is_async=True)`` (the seed's spelling) or ``await run.save.aio()``
        from async code.

        Index first: a crash between the two writes leaves an index entry that
        disagrees with its record, which the next listing repairs, never a record the
        index does not know. While a job's `RecordWriter` is attached
        (`trainkit_core.training.background`), the copy is only queued here and
        written by its thread, so the job never waits for the store.
        """
        if is_async:
            return in_thread(self.save)
        writer = self._writer
        if writer is not None:
            writer.submit(self.snapshot)
            return None
        self.write_record(self.snapshot())
        return None

    @property
    def writer(self) -> Any:
        """The job's `RecordWriter` that `save` queues to, or None (`save` writes itself)."""
        return self._writer

    def route_saves(self, writer: Any) -> None:
        """Have `save` queue its copies to `writer`, or (None) write them itself again."""
        self._writer = writer

    def snapshot(self) -> dict[str, Any]:
        """The record as it stands now, stamped with the time, for `write_record`."""
        self.updated_at = time.time()
        return self.model_dump(mode="json")

    def write_record(self, data: dict[str, Any]) -> None:
        """Write a copy `save` took: the index entry first when it changed, then the record."""
        from trainkit_core.runs.index import same_entry

        group = (data.get("metadata") or {}).get("group_id")
        indexed = (str(data.get("status") or "pending"), str(group) if group else None)
        if self._indexed is None or not same_entry(indexed, self._indexed):
            try:
                self.store.index.note(data)
                self._indexed = indexed
            except TrainkitError as exc:  # the index is a cache of the records: never lose a record to it
                log.warning("run %s: the runs index was not updated (%s); a listing repairs it", self.id, exc)
        ours = dict(data.get("metadata") or {})
        with self._record_lock():
            stored = self.store.records.get(self.id)
            if isinstance(stored, dict):
                data.update({name: stored[name] for name in SHARED_FIELDS if name in stored})
                # Filled by the submitter after the job read its copy: an empty value never erases them.
                data.update(
                    {name: stored[name] for name in SUBMITTER_FIELDS if stored.get(name) and not data.get(name)}
                )
                data["metadata"] = _merge_metadata(stored.get("metadata"), ours, self._metadata_seen)
                restate_seed_names(data)
            self.store.records.put(self.id, data)
            self._metadata_seen = ours

    def update_shared(self, change: Callable[[Self], None]) -> None:
        """Apply `change` to the stored record (not this copy) under its lock: `SHARED_FIELDS`, `SUBMITTER_FIELDS`.

        Reading the stored record inside the lock is what keeps another writer's
        addition (a client's component, the job's rollout) from being lost.
        """
        with self._record_lock():
            stored = self.store.records.get(self.id)
            fresh = type(self).from_stored_data(stored, store=self.store) if isinstance(stored, dict) else self
            change(fresh)
            fresh.updated_at = time.time()
            self.store.records.put(self.id, fresh.model_dump(mode="json"))
        for name in (*SHARED_FIELDS, *SUBMITTER_FIELDS):
            setattr(self, name, getattr(fresh, name))

    def _record_lock(self) -> contextlib.AbstractContextManager[None]:
        from trainkit_core.toolkit.kv_lock import LOCKS_NAMESPACE, kv_lock

        return kv_lock(
            self.store.kv(LOCKS_NAMESPACE), f"record/{self.id}", busy=f"run {self.id} is being saved by another writer"
        )

    def write_history(self) -> None:
        """Copy the record and its events to the models volume (durable history)."""
        base = history_dir(self.id)
        self.store.models.write_bytes(f"{base}/record.json", self.model_dump_json(indent=2).encode())
        lines = "".join(json.dumps(e) + "\n" for e in self.store.events(self.id).read())
        self.store.models.write_bytes(f"{base}/events.jsonl", lines.encode())


def _merge_metadata(stored: object, ours: dict[str, Any], seen: dict[str, Any] | None) -> dict[str, Any]:
    """The stored metadata with what this handle changed since it last read or wrote it (`seen`).

    A key this handle set or changed takes its value, one it removed goes, and every
    other key stays as stored: another handle's additions are never lost. Without a
    snapshot (a run object never read from the store) this handle's keys are the record's.
    """
    if seen is None or not isinstance(stored, dict):
        return dict(ours)
    merged = dict(stored)
    for key in seen.keys() - ours.keys():
        merged.pop(key, None)
    merged.update({key: value for key, value in ours.items() if key not in seen or seen[key] != value})
    return merged
