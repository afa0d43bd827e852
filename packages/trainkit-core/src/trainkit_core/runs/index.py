"""The index of runs: a page of the run listing costs what the page costs.

Without it, listing runs reads every record (on Modal: a scan of the whole ``runs``
Dict over the network). The index is built from key-value operations only (`get`,
`put`, `put_if_absent`, `delete`), so it works on every provider's `KVStore`, and lives
in its own namespace, ``runs-index``:

- ``b/<YYYYMMDDHH>``: a *bucket*, the runs created in one hour (UTC, read from the run
  id), each as ``[status, group id or null, time of the index write]``;
- ``root``: every bucket with its version and how many of its runs have each status,
  so a listing skips buckets without a match (``status=running`` reads the buckets
  holding running runs, not the whole history);
- ``g/<group id>``: the run ids of one sweep group.

Several processes write these documents at once (the client that starts a run, the
job that runs it, the reconciler), and a Modal Dict has no compare-and-set. Each
document is therefore a `VersionedDoc`: version ``n + 1`` is written with
`put_if_absent`, so of two writers who read version ``n`` only one wins, and the other
reads again and retries. Nothing is lost to a race.

Records stay the truth. `TrainingRun.save` writes the index *before* the record, so a
crash between the two leaves an entry that disagrees with its record, never a record
the index misses. Readers check every entry they use against its record and repair
it (`RunIndex.check`): a status changed behind the index's back is rewritten, an entry
whose record is gone is dropped (after a grace period that covers a write in flight).
A lost index (no ``root``) or a lost bucket is rebuilt from the records. Records
written around `TrainingRun.save` (another tool, an old version) are found by
`RunIndex.rebuild` (``trainkit runs list --reindex``).
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from trainkit_core.errors import ConflictError
from trainkit_core.plugins.hookspecs import KVStore
from trainkit_core.toolkit.kv_values import get_many, put_many

log = logging.getLogger(__name__)

INDEX_NAMESPACE = "runs-index"

#: An index entry younger than this whose record is missing or older is taken for a
#: write in flight (index first, record next), not for damage to repair.
GRACE_S = 120.0

#: Attempts of a compare-and-set before giving up (each lost race means another
#: writer made progress, so this is only reached under heavy contention).
MAX_ATTEMPTS = 64

_UNCHANGED = object()


#: Statuses the index need not tell apart: a listing filtered by any status also looks
#: at every unfinished run (to reconcile it), so a run going from pending to running
#: costs no index write, and an entry that says pending for a running run is not damage.
ALIKE = {"running": "pending"}


def same_entry(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two entries' (status, group) are the same as far as the index tells."""
    return (ALIKE.get(a[0], a[0]), a[1]) == (ALIKE.get(b[0], b[0]), b[1])


def bucket_of(run_id: str) -> str:
    """The hour a run was created, from its id: ``run-20261201-021800-abcdef`` -> ``2026120102``."""
    return run_id[4:12] + run_id[13:15]


class VersionedDoc:
    """One JSON document that many writers change safely through `put_if_absent`.

    Versions are keys ``<name>@<n>``; ``<name>@head`` points at the latest version (a
    hint that may lag: readers look further until a version is missing). A writer
    reads version ``n``, computes the new value, and writes version ``n + 1`` with
    `put_if_absent`; losing means someone else wrote ``n + 1`` first, so it reads
    again.

    A replaced version is overwritten with a small tombstone, not deleted: were its
    key free again, a writer that read an older version could take it (the ABA
    problem) and lose every update in between. Tombstones older than `STALE_S` are
    deleted `KEEP` versions later, when no writer can still be aiming at them (a
    writer gives up on a read older than half of `STALE_S`).
    """

    #: Versions kept as tombstones before one is collected.
    KEEP = 64
    STALE_S = 600.0

    def __init__(self, kv: KVStore, name: str) -> None:
        self.kv = kv
        self.name = name
        self._head = f"{name}@head"

    def _key(self, version: int) -> str:
        return f"{self.name}@{version:010d}"

    @staticmethod
    def _gone(value: Any) -> bool:
        return isinstance(value, dict) and "__gone__" in value

    def read(self) -> tuple[int, Any]:
        """(version, value) of the latest version; (0, None) when there is none."""
        version = int(self.kv.get(self._head, 0) or 0)
        # The version the head names and the next one in one call where the store can
        # (`get_many`): the next is missing unless the head lags.
        found = get_many(self.kv, [self._key(v) for v in (version, version + 1) if v])
        value = found.get(self._key(version)) if version else None
        newer = found.get(self._key(version + 1))
        while newer is not None:
            version, value = version + 1, newer
            newer = self.kv.get(self._key(version + 1))
        return version, None if self._gone(value) else value

    def update(self, change: Callable[[Any], Any]) -> tuple[int, Any]:
        """Apply `change(old value or None)` -> new value (or `UNCHANGED`); returns (version, value)."""
        for attempt in range(MAX_ATTEMPTS):
            read_at = time.monotonic()
            version, value = self.read()
            new = change(value)
            if new is _UNCHANGED:
                return version, value
            if time.monotonic() - read_at < self.STALE_S / 2 and self.kv.put_if_absent(self._key(version + 1), new):
                self._after_write(version + 1)
                return version + 1, new
            time.sleep(random.uniform(0, 0.002 * (attempt + 1)))  # another writer won: read again
        raise ConflictError(f"index document {self.name!r} is changed by too many writers at once; try again")

    def _after_write(self, version: int) -> None:
        now = time.time()
        writes: dict[str, Any] = {self._head: version}
        if version > 1:
            writes[self._key(version - 1)] = {"__gone__": now}
        put_many(self.kv, writes)  # one call where the store can
        old = version - 1 - self.KEEP
        if old > 0:
            stone = self.kv.get(self._key(old))
            if self._gone(stone) and stone["__gone__"] < now - self.STALE_S:
                self.kv.delete(self._key(old))


UNCHANGED = _UNCHANGED


def _summary(bucket: dict[str, Any]) -> dict[str, int]:
    return dict(Counter(str(entry[0]) for entry in bucket.values()))


def _entry_of(data: dict[str, Any], written: float) -> list[Any]:
    group = (data.get("metadata") or {}).get("group_id")
    return [data.get("status") or "pending", str(group) if group else None, written]


class RunIndex:
    """The index of one provider's runs (see the module docstring for the layout)."""

    def __init__(
        self,
        kv: KVStore,
        records: Callable[[], KVStore],
        *,
        history: Callable[[str], dict[str, dict[str, Any]]] | None = None,
    ) -> None:
        self.kv = kv
        self._records = records
        #: The durable copies of records by id prefix (the models volume), which a KV that
        #: expires entries may have forgotten: a rebuild reads them too (the KV's copy wins).
        self._history = history

    def _all_records(self, prefix: str) -> dict[str, Any]:
        found = dict(self._history(prefix)) if self._history is not None else {}
        found.update(self.records.items(prefix))
        return found

    @property
    def records(self) -> KVStore:
        return self._records()

    def _root(self) -> VersionedDoc:
        return VersionedDoc(self.kv, "root")

    def _bucket(self, bucket: str) -> VersionedDoc:
        return VersionedDoc(self.kv, f"b/{bucket}")

    def _group(self, group: str) -> VersionedDoc:
        return VersionedDoc(self.kv, f"g/{group}")

    # ------------------------------------------------------------------ writing

    def note(self, data: dict[str, Any]) -> None:
        """Index a run record that is about to be written (status or group changed)."""
        run_id = str(data["id"])
        entry = _entry_of(data, time.time())
        bucket = bucket_of(run_id)

        def put(doc: Any) -> Any:
            doc = dict(doc) if doc is not None else self._bucket_from_records(bucket)
            if doc.get(run_id, [None, None])[:2] == entry[:2]:
                return UNCHANGED
            doc[run_id] = entry
            return doc

        if not self._publish(bucket, *self._bucket(bucket).update(put)):
            # The first write after the index was lost (or never built): rebuilt from
            # the records (this run's with its old status), then this change again.
            self.rebuild()
            self.note(data)
            return
        if entry[1]:
            self._add_to_group(entry[1], [run_id])

    def forget(self, run_id: str, group: str | None = None) -> None:
        """Drop a run from the index (its record is gone), unless its entry is a write in flight."""
        bucket = bucket_of(run_id)
        groups = {group} if group else set()

        def drop(doc: Any) -> Any:
            if doc is None or run_id not in doc:
                return UNCHANGED
            if time.time() - float(doc[run_id][2]) < GRACE_S:
                groups.clear()  # the record is about to be written
                return UNCHANGED
            if doc[run_id][1]:
                groups.add(doc[run_id][1])
            return {k: v for k, v in doc.items() if k != run_id}

        self._publish(bucket, *self._bucket(bucket).update(drop))
        for group in groups:
            self._group(group).update(
                lambda doc: UNCHANGED if not doc or run_id not in doc else [r for r in doc if r != run_id]
            )

    def _add_to_group(self, group: str, run_ids: list[str]) -> None:
        def add(doc: Any) -> Any:
            have = set(doc or [])
            if have.issuperset(run_ids):
                return UNCHANGED
            return sorted(have.union(run_ids))

        self._group(group).update(add)

    def _publish(self, bucket: str, version: int, doc: Any) -> bool:
        """Tell the root what a bucket now holds (unless a newer version already did).

        False when there is no root (the index was lost or never built): nothing is
        written, since a root of this bucket alone would hide every other run.
        """
        summary = _summary(doc or {})
        missing = False

        def put(root: Any) -> Any:
            nonlocal missing
            if root is None:
                missing = True
                return UNCHANGED
            missing = False
            root = dict(root)
            buckets = dict(root.get("buckets") or {})
            known = buckets.get(bucket)
            if known is not None and known["v"] >= version:
                return UNCHANGED
            if not summary:
                buckets.pop(bucket, None)
            else:
                buckets[bucket] = {"v": version, "n": summary}
            root["buckets"] = buckets
            return root

        self._root().update(put)
        return not missing

    def _bucket_from_records(self, bucket: str) -> dict[str, Any]:
        """A lost bucket, rebuilt from the records of its hour."""
        prefix = f"run-{bucket[:8]}-{bucket[8:]}"
        return {key: _entry_of(data, 0.0) for key, data in self._all_records(prefix).items() if isinstance(data, dict)}

    def _rebuild_bucket(self, bucket: str) -> Callable[[Any], Any]:
        def change(old: Any) -> Any:
            return UNCHANGED if old is not None else self._bucket_from_records(bucket)

        return change

    def rebuild(self) -> int:
        """Rebuild the whole index from the records; returns how many runs it holds.

        Reads every record once (a full scan: the cost the index saves every listing).
        Entries of runs whose record is not written yet (younger than `GRACE_S`) are kept.
        """
        started = time.time()
        buckets: dict[str, dict[str, Any]] = {}
        groups: dict[str, list[str]] = {}
        for key, data in self._all_records("run-").items():
            if not isinstance(data, dict):
                continue
            entry = _entry_of(data, 0.0)
            buckets.setdefault(bucket_of(key), {})[key] = entry
            if entry[1]:
                groups.setdefault(entry[1], []).append(key)
        root = self._root().read()[1] or {"buckets": {}}
        versions = {}
        for bucket in sorted(set(buckets) | set(root.get("buckets") or {})):
            fresh = buckets.get(bucket, {})

            def replace(doc: Any, fresh: dict[str, Any] = fresh) -> Any:
                in_flight = {k: v for k, v in (doc or {}).items() if k not in fresh and v[2] > started - GRACE_S}
                new = {**fresh, **in_flight}
                return UNCHANGED if doc == new else new

            version, doc = self._bucket(bucket).update(replace)
            versions[bucket] = (version, _summary(doc or {}))

        def put(root: Any) -> Any:
            merged = dict((root or {}).get("buckets") or {})  # keeps buckets a writer added meanwhile
            for bucket, (version, summary) in versions.items():
                known = merged.get(bucket)
                if known is not None and known["v"] > version:
                    continue  # a writer published a newer version of this bucket meanwhile
                if summary:
                    merged[bucket] = {"v": version, "n": summary}
                else:
                    merged.pop(bucket, None)
            return {"buckets": merged, "rebuilt_at": started}

        self._root().update(put)
        for group, run_ids in groups.items():
            self._add_to_group(group, run_ids)
        count = sum(len(b) for b in buckets.values())
        log.info("rebuilt the runs index from %d records in %.2f s", count, time.time() - started)
        return count

    # ------------------------------------------------------------------ reading

    def candidates(
        self, *, statuses: set[str] | None = None, group: str | None = None, after: str | None = None
    ) -> Iterator[tuple[str, list[Any] | None]]:
        """Run ids newest first (with their index entry), as the index knows them.

        Lazy: a listing stops reading buckets once its page is full. With `group`, the
        group's runs (entry None: their status is checked on the record).
        """
        if group is not None:
            for run_id in sorted(self._group(group).read()[1] or [], reverse=True):
                if after is None or run_id < after:
                    yield run_id, None
            return
        root = self._root().read()[1]
        if root is None:
            self.rebuild()
            root = self._root().read()[1] or {}
        last = bucket_of(after) if after else None
        for bucket, info in sorted((root.get("buckets") or {}).items(), reverse=True):
            if last is not None and bucket > last:
                continue
            if statuses is not None and not any(info["n"].get(s) for s in statuses):
                continue
            doc = self._bucket(bucket).read()[1]
            if doc is None:  # lost: rebuilt from the records of its hour
                rebuilt = self._bucket(bucket).update(self._rebuild_bucket(bucket))
                self._publish(bucket, *rebuilt)
                doc = rebuilt[1] or {}
            for run_id, entry in sorted(doc.items(), reverse=True):
                if (after is None or run_id < after) and (statuses is None or entry[0] in statuses):
                    yield run_id, entry

    def check(self, run_id: str, entry: list[Any] | None, data: Any, *, group: str | None = None) -> bool:
        """Compare an index entry with its record (None when missing); repair it. True: use the record.

        `group`: the group whose list named the run (then `entry` is None).
        """
        now = time.time()
        in_flight = entry is not None and now - float(entry[2]) < GRACE_S
        if not isinstance(data, dict):
            if not in_flight:
                self.forget(run_id, group)  # looks at the bucket entry first when `entry` is None
            return False
        if entry is None:
            return True
        fresh = _entry_of(data, now)
        if not same_entry(fresh, entry) and (not in_flight or float(data.get("updated_at") or 0) > float(entry[2])):
            try:
                self.note(data)  # the record changed behind the index's back
            except ConflictError:
                log.warning("could not repair the index entry of run %s now; a later listing will", run_id)
        return True
