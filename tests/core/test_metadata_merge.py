"""Two writers of one run never undo each other's metadata keys.

Seed 002: `from_stored_data` "snapshots its metadata keys"; a save merges what this
handle changed into the stored record, so another handle's keys survive.
"""

from __future__ import annotations

import time

import pytest

from trainkit_core import get_provider
from trainkit_core.ids import new_run_id
from trainkit_core.runs.training_run import RunStore, TrainingRun


@pytest.fixture
def store() -> RunStore:
    return RunStore.for_provider(get_provider("local"))


def _new(store: RunStore, **metadata: object) -> TrainingRun:
    run = TrainingRun(id=new_run_id(), created_at=time.time(), metadata=dict(metadata))
    run.attach(store).save()
    return run


def test_two_handles_each_adding_a_key_keep_both(store: RunStore) -> None:
    run = _new(store, group_id="sweep-1")
    first, second = TrainingRun.from_id(run.id, store=store), TrainingRun.from_id(run.id, store=store)
    first.metadata["owner"] = "ana"
    first.save()
    second.metadata["note"] = "lr too high"
    second.save()
    stored = TrainingRun.from_id(run.id, store=store).metadata
    assert stored == {"group_id": "sweep-1", "owner": "ana", "note": "lr too high"}


def test_a_handle_saving_again_keeps_the_other_handles_key(store: RunStore) -> None:
    run = _new(store)
    first, second = TrainingRun.from_id(run.id, store=store), TrainingRun.from_id(run.id, store=store)
    first.metadata["a"] = 1
    first.save()
    second.metadata["b"] = 2
    second.save()
    first.metadata["c"] = 3  # first never saw "b": saving again must not drop it
    first.save()
    assert TrainingRun.from_id(run.id, store=store).metadata == {"a": 1, "b": 2, "c": 3}


def test_a_removed_or_changed_key_is_what_the_handle_did_and_others_keys_stay(store: RunStore) -> None:
    run = _new(store, keep="x", drop="y", change="old")
    first, second = TrainingRun.from_id(run.id, store=store), TrainingRun.from_id(run.id, store=store)
    del first.metadata["drop"]
    first.metadata["change"] = "new"
    first.save()
    second.metadata["added"] = True  # second still holds "drop" and "change": old, unchanged by it
    second.save()
    assert TrainingRun.from_id(run.id, store=store).metadata == {"keep": "x", "change": "new", "added": True}


def test_the_same_key_set_by_both_keeps_the_last_writer(store: RunStore) -> None:
    run = _new(store)
    first, second = TrainingRun.from_id(run.id, store=store), TrainingRun.from_id(run.id, store=store)
    first.metadata["k"] = "first"
    first.save()
    second.metadata["k"] = "second"
    second.save()
    assert TrainingRun.from_id(run.id, store=store).metadata == {"k": "second"}


def test_the_creating_handle_saving_again_keeps_a_key_another_handle_added(store: RunStore) -> None:
    run = _new(store, group_id="sweep-1")  # never read from the store: its first save is its snapshot
    other = TrainingRun.from_id(run.id, store=store)
    other.metadata["owner"] = "ana"
    other.save()
    run.status = "running"
    run.save()
    assert TrainingRun.from_id(run.id, store=store).metadata == {"group_id": "sweep-1", "owner": "ana"}
