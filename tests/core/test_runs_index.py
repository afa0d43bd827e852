"""The runs index: listings in order, filtered, paged; repaired from the records; safe with two writers."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_core import get_provider
from trainkit_core.runs import index as runs_index
from trainkit_core.runs.index import INDEX_NAMESPACE, VersionedDoc, bucket_of
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.toolkit.sqlite_kv import LocalKV


def run_id(created: float, n: int) -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime(created)) + f"{n:06x}"


def make_runs(store: RunStore, count: int, *, start: float | None = None, step_s: float = 600) -> list[str]:
    """`count` runs `step_s` apart (several hours: several buckets), statuses and groups in a pattern."""
    start = start if start is not None else time.time() - count * step_s
    ids = []
    for i in range(count):
        created = start + i * step_s
        run = TrainingRun(
            id=run_id(created, i),
            created_at=created,
            status=("succeeded", "failed", "stopped")[i % 3],
            metadata={"group_id": f"g{i % 4}"} if i % 2 == 0 else {},
        ).attach(store)
        run.save()
        ids.append(run.id)
    return ids


@pytest.fixture
def store() -> RunStore:
    return RunStore.for_provider(get_provider("local"))


def ids(runs: list[TrainingRun]) -> list[str]:
    return [r.id for r in runs]


def test_pages_newest_first_with_filters(store: RunStore) -> None:
    made = make_runs(store, 30)
    newest = sorted(made, reverse=True)
    assert len({bucket_of(i) for i in made}) > 3, "the runs should span several buckets"
    page, more = store.page(limit=10)
    assert ids(page) == newest[:10] and more
    page2, more2 = store.page(limit=10, after=page[-1].id)
    assert ids(page2) == newest[10:20] and more2
    page3, more3 = store.page(limit=10, after=page2[-1].id)
    assert ids(page3) == newest[20:] and not more3
    failed = [i for n, i in enumerate(made) if n % 3 == 1]
    assert ids(store.page(status="failed", limit=100)[0]) == sorted(failed, reverse=True)
    g2 = [i for n, i in enumerate(made) if n % 2 == 0 and n % 4 == 2]
    assert ids(store.list(group_id="g2")) == sorted(g2, reverse=True)
    g2_stopped = [i for n, i in enumerate(made) if n % 4 == 2 and n % 3 == 2]
    assert ids(store.list(group_id="g2", status="stopped")) == sorted(g2_stopped, reverse=True)
    assert store.list(group_id="nobody") == []


def test_page_json_gives_each_records_json_and_sees_every_change(store: RunStore) -> None:
    made = make_runs(store, 5)
    expected = [(r.id, r.model_dump_json()) for r in store.page(limit=10)[0]]
    assert store.page_json(limit=10) == (expected, False)
    newest = max(made)
    changed = {**store.records.get(newest), "metrics": {"final_loss": 0.25}, "unknown_field": 1}
    store.records.put(newest, changed)  # behind the store's back: the memo must not hide it
    assert store.page_json(limit=1)[0] == [(newest, TrainingRun.model_validate(changed).model_dump_json())]
    assert store.page(limit=1)[0][0].metrics == {"final_loss": 0.25}


def test_status_changes_move_runs_between_filters(store: RunStore) -> None:
    made = make_runs(store, 6)
    run = store.get(made[0])
    assert run.id not in ids(store.list(status="running"))
    run.status = "running"
    run.save()
    assert ids(store.list(status="running")) == [run.id]
    run.status = "succeeded"
    run.save()
    assert store.list(status="running") == []
    assert run.id in ids(store.list(status="succeeded"))


def test_a_status_filter_reads_only_buckets_that_hold_it(store: RunStore) -> None:
    made = make_runs(store, 40)
    one = store.get(made[3])
    one.status = "running"
    one.save()
    index_kv = store.index.kv
    reads: list[str] = []
    original = index_kv.get

    def counting_get(key: str, default: Any = None) -> Any:
        reads.append(key)
        return original(key, default)

    index_kv.get = counting_get  # type: ignore[method-assign]
    assert ids(store.list(status="running")) == [one.id]
    buckets_read = {key.split("@")[0] for key in reads if key.startswith("b/")}
    assert buckets_read == {f"b/{bucket_of(one.id)}"}


def test_a_record_changed_behind_the_index_is_repaired(store: RunStore) -> None:
    made = make_runs(store, 6)
    data = store.records.get(made[0])
    assert data["status"] == "succeeded"
    data["status"] = "failed"
    data["updated_at"] = time.time()
    store.records.put(made[0], data)  # around TrainingRun.save: the index still says succeeded
    listed = {r.id: r.status for r in store.list()}
    assert listed[made[0]] == "failed"  # the record is the truth
    assert made[0] in ids(store.list(status="failed"))  # and the listing repaired the index
    assert made[0] not in ids(store.list(status="succeeded"))


def test_an_entry_whose_record_is_gone_is_dropped(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    made = make_runs(store, 6)
    monkeypatch.setattr(runs_index, "GRACE_S", 0.0)  # the entries are past the grace of a write in flight
    store.records.delete(made[2])  # made[2] is in group g2
    assert made[2] not in ids(store.list())
    bucket = VersionedDoc(store.index.kv, f"b/{bucket_of(made[2])}").read()[1]
    assert made[2] not in bucket
    assert made[2] not in (VersionedDoc(store.index.kv, "g/g2").read()[1] or [])


def test_an_entry_just_written_waits_for_its_record(store: RunStore) -> None:
    """Index first, record next: a listing between the two must not drop the entry."""
    made = make_runs(store, 3)
    created = time.time()
    pending = TrainingRun(id=run_id(created, 99), created_at=created, metadata={"group_id": "g0"}).attach(store)
    store.index.note(pending.model_dump(mode="json"))  # the record is not written yet
    assert pending.id not in ids(store.list())
    assert pending.id not in ids(store.list(group_id="g0"))
    pending.save()
    assert ids(store.list())[0] == pending.id
    assert pending.id in ids(store.list(group_id="g0"))
    assert len(store.list()) == len(made) + 1


def test_a_lost_index_is_rebuilt_from_the_records(store: RunStore, trainkit_home: Path) -> None:
    made = make_runs(store, 12)
    index_kv = LocalKV(trainkit_home, INDEX_NAMESPACE)
    for key in index_kv.keys(""):
        index_kv.delete(key)
    assert ids(store.list()) == sorted(made, reverse=True)
    assert ids(store.list(group_id="g0")) == sorted([i for n, i in enumerate(made) if n % 4 == 0], reverse=True)
    # A lost bucket alone is rebuilt too.
    bucket = bucket_of(made[5])
    for key in index_kv.keys(f"b/{bucket}@"):
        index_kv.delete(key)
    assert ids(store.list()) == sorted(made, reverse=True)


def test_a_status_change_after_the_index_was_lost_rebuilds_it_with_every_run(
    store: RunStore, trainkit_home: Path
) -> None:
    made = make_runs(store, 6)
    index_kv = LocalKV(trainkit_home, INDEX_NAMESPACE)
    for key in index_kv.keys(""):
        index_kv.delete(key)
    run = store.get(made[0])
    run.status = "running"
    run.save()  # rebuilds from the records (this run still succeeded there), then notes the change
    assert store.index.kv.keys("root@")
    assert ids(store.list()) == sorted(made, reverse=True)
    assert ids(store.list(status="running")) == [made[0]]


def test_pending_to_running_costs_no_index_write_and_is_listed_as_running(store: RunStore, trainkit_home: Path) -> None:
    make_runs(store, 3)
    created = time.time()
    run = TrainingRun(id=run_id(created, 99), created_at=created, status="pending").attach(store)
    run.save()
    index_kv = LocalKV(trainkit_home, INDEX_NAMESPACE)
    before = {key: index_kv.get(key) for key in index_kv.keys("")}
    run.status = "running"
    run.save()
    assert {key: index_kv.get(key) for key in index_kv.keys("")} == before
    assert ids(store.list(status="running")) == [run.id]
    assert ids(store.list(status="pending")) == []
    run.status = "failed"
    run.save()
    assert ids(store.list(status="failed"))[0] == run.id


def test_records_written_around_the_index_are_found_by_a_rebuild(store: RunStore) -> None:
    make_runs(store, 3)
    created = time.time()
    stray = TrainingRun(id=run_id(created, 77), created_at=created, status="failed")
    store.records.put(stray.id, stray.model_dump(mode="json"))  # no index write at all
    assert stray.id not in ids(store.list())
    assert store.index.rebuild() == 4
    assert ids(store.list(status="failed"))[0] == stray.id


@pytest.mark.slow
def test_versioned_doc_loses_no_update_to_a_race(trainkit_home: Path) -> None:
    doc = VersionedDoc(LocalKV(trainkit_home, "t"), "counter")
    writers = 4
    with multiprocessing.get_context("spawn").Pool(writers) as pool:
        pool.starmap(_bump, [(str(trainkit_home), 25)] * writers)
    version, value = doc.read()
    assert value == writers * 25
    assert version == writers * 25
    stones = [LocalKV(trainkit_home, "t").get(k) for k in LocalKV(trainkit_home, "t").keys("counter@0")]
    assert len(stones) == version and all("__gone__" in s for s in stones[:-1])  # replaced: tombstones


def _bump(home: str, times: int) -> None:
    doc = VersionedDoc(LocalKV(Path(home), "t"), "counter")
    for _ in range(times):
        doc.update(lambda value: (value or 0) + 1)


@pytest.mark.slow
def test_two_processes_index_their_runs_at_once(store: RunStore, trainkit_home: Path) -> None:
    """Two writers (say a sweep on two machines) create and finish runs in the same buckets."""
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        made = pool.starmap(_writer, [(str(trainkit_home), w) for w in range(2)])
    every = sorted((i for batch in made for i in batch), reverse=True)
    assert ids(store.list()) == every
    assert ids(store.list(status="succeeded")) == every
    assert store.list(status="running") == []
    assert ids(store.list(group_id="shared")) == every


def _writer(home: str, writer: int) -> list[str]:
    import os

    os.environ["TRAINKIT_HOME"] = home
    store = RunStore.for_provider(get_provider("local"))
    start = time.time() - 3600
    made = []
    for i in range(15):
        created = start + i * 60
        run = TrainingRun(
            id=run_id(created, writer * 1000 + i), created_at=created, metadata={"group_id": "shared"}
        ).attach(store)
        run.save()
        run.status = "running"
        run.save()
        run.status = "succeeded"
        run.save()
        made.append(run.id)
    return made
