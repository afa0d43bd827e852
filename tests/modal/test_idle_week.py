"""Modal drops a Dict entry after 7 days without a read or write (modal 1.6.4's `dict.py`).

The models volume is the durable record: after an idle week through the strict fake, what
a user made is still found there.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import ModuleType

from test_runs_listing import modal_store

from trainkit_core.ids import new_run_id
from trainkit_core.runs.retention import GC_GRACE_S, collect_garbage
from trainkit_core.runs.training_run import RunStore, TrainingRun

WEEK_AND_A_DAY = 8 * 24 * 3600.0


def _finished_run(store: RunStore) -> TrainingRun:
    run = TrainingRun(id=new_run_id(), created_at=time.time(), status="succeeded", metadata={"group_id": "g1"})
    run.attach(store).save()
    run.write_history()
    return run


def test_the_fake_dict_forgets_an_entry_idle_for_a_week_but_not_one_read_meanwhile(fake_modal: ModuleType) -> None:
    d = fake_modal.Dict.from_name("idle-test", create_if_missing=True)
    d.put("idle", 1)
    d.put("used", 2)
    fake_modal.advance_clock(6 * 24 * 3600.0)
    assert d.get("used") == 2
    fake_modal.advance_clock(2 * 24 * 3600.0)
    assert d.get("idle") is None and d.get("used") == 2


def test_a_run_is_still_loaded_after_an_idle_week(fake_modal: ModuleType) -> None:
    store = modal_store(fake_modal)
    run = _finished_run(store)
    fake_modal.advance_clock(WEEK_AND_A_DAY)
    loaded = TrainingRun.from_id(run.id, store=modal_store(fake_modal))
    assert (loaded.id, loaded.status, loaded.group_id) == (run.id, "succeeded", "g1")


def test_runs_list_still_lists_a_run_after_an_idle_week(fake_modal: ModuleType) -> None:
    store = modal_store(fake_modal)
    run = _finished_run(store)
    fake_modal.advance_clock(WEEK_AND_A_DAY)
    page, _ = modal_store(fake_modal).page(limit=20)
    assert [r.id for r in page] == [run.id]


def test_reindex_after_an_idle_week_finds_the_runs_on_the_volume(fake_modal: ModuleType) -> None:
    store = modal_store(fake_modal)
    older, newer = _finished_run(store), _finished_run(store)
    fake_modal.advance_clock(WEEK_AND_A_DAY)
    store = modal_store(fake_modal)
    assert store.index.rebuild() == 2
    assert [r.id for r in store.page(limit=20)[0]] == sorted([older.id, newer.id], reverse=True)
    assert [r.id for r in store.page(group_id="g1", limit=20)[0]] == sorted([older.id, newer.id], reverse=True)


def test_a_half_written_record_on_the_volume_is_skipped_and_the_others_listed(fake_modal: ModuleType) -> None:
    store = modal_store(fake_modal)
    whole, cut = _finished_run(store), _finished_run(store)
    text = store.models.read_bytes(f"runs/{cut.id}/record.json")
    store.models.write_bytes(f"runs/{cut.id}/record.json", text[: len(text) // 2])
    fake_modal.advance_clock(WEEK_AND_A_DAY)
    store = modal_store(fake_modal)
    assert [r.id for r in store.page(limit=20)[0]] == [whole.id]
    assert store.index.rebuild() == 1


def test_a_record_in_the_dict_but_not_on_the_volume_is_listed(fake_modal: ModuleType) -> None:
    store = modal_store(fake_modal)
    run = TrainingRun(id=new_run_id(), created_at=time.time(), status="running")
    run.attach(store).save()  # no history written yet
    assert [r.id for r in store.list()] == [run.id]
    assert store.index.rebuild() == 1


def _dataset(folder: Path, answer: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.toml").write_text('name = "shout"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": answer}]}
    (folder / "train.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def test_gc_after_an_idle_week_keeps_the_dataset_version_an_old_run_trained_on(
    fake_modal: ModuleType, tmp_path: Path
) -> None:
    from trainkit_core.datasets.sync import sync_to_volume

    store = modal_store(fake_modal)
    data = store.provider.volume("data")
    used = sync_to_volume(data, _dataset(tmp_path / "shout", "HI"))
    unused = sync_to_volume(data, _dataset(tmp_path / "shout", "HELLO"))
    sync_to_volume(data, _dataset(tmp_path / "shout", "HEY"))  # current
    run = TrainingRun(id=new_run_id(), created_at=time.time(), status="succeeded", dataset_hash=used.hash)
    run.attach(store).save()
    run.write_history()
    fake_modal.advance_clock(WEEK_AND_A_DAY)
    store = modal_store(fake_modal)
    removed = collect_garbage(store, data, dry_run=True, now=time.time() + 2 * GC_GRACE_S).paths
    assert f"datasets/shout/versions/{unused.version}" in removed
    assert not any(used.version in p for p in removed)


def test_the_events_of_a_run_whose_history_was_written_survive_an_idle_week(fake_modal: ModuleType) -> None:
    store = modal_store(fake_modal)
    run = TrainingRun(id=new_run_id(), created_at=time.time(), status="succeeded").attach(store)
    run.save()
    run.events.append("progress", step=1, loss=2.0)
    run.write_history()
    fake_modal.advance_clock(WEEK_AND_A_DAY)
    loaded = TrainingRun.from_id(run.id, store=modal_store(fake_modal))
    assert [(e["type"], e.get("step")) for e in loaded.events.read()] == [("progress", 1)]


def test_the_events_of_a_run_whose_job_ended_without_its_history_survive_an_idle_week(fake_modal: ModuleType) -> None:
    """The job never wrote the run's history (cancelled here; killed or out of memory alike): the reconciler does."""
    from trainkit_core.runs.reconcile import reconcile_run

    store = modal_store(fake_modal)
    provider = store.provider
    provider.deployment().deploy()
    handle = provider.spawn("sleep", seconds=120)
    run = TrainingRun(id=new_run_id(), created_at=time.time(), status="running", call_id=handle.call_id)
    run.attach(store).save()
    run.events.append("progress", step=1, loss=2.5)
    handle.cancel()
    deadline = time.monotonic() + 60
    while not handle.status().done and time.monotonic() < deadline:
        time.sleep(0.1)
    assert reconcile_run(run) is True and run.status == "failed"

    fake_modal.advance_clock(WEEK_AND_A_DAY)
    loaded = TrainingRun.from_id(run.id, store=modal_store(fake_modal))
    assert loaded.status == "failed" and loaded.error_message == "the job was cancelled"
    events = [(e["type"], e.get("step"), e.get("status")) for e in loaded.events.read()]
    assert events[0] == ("progress", 1, None) and events[-1] == ("status", None, "failed")
