"""gc frees the export of a run that no longer exists (a run deleted while its export job ran)."""

from __future__ import annotations

import time
from pathlib import Path

from trainkit_core import get_provider
from trainkit_core.ids import new_run_id
from trainkit_core.runs.retention import GC_GRACE_S, collect_garbage, delete_run
from trainkit_core.runs.training_run import RunStore, TrainingRun


def test_gc_removes_the_export_of_a_deleted_run_and_keeps_a_live_runs(trainkit_home: Path) -> None:
    provider = get_provider("local")
    store = RunStore.for_provider(provider)
    kept = TrainingRun(id=new_run_id(), created_at=time.time(), status="succeeded").attach(store)
    kept.save()
    deleted = TrainingRun(id=new_run_id(), created_at=time.time(), status="succeeded").attach(store)
    deleted.save()
    delete_run(store, deleted.id)
    # What an export job that was merging during the delete renames into place afterwards.
    for run_id in (kept.id, deleted.id):
        store.models.write_bytes(f"exports/{run_id}/model.safetensors", b"w" * 1000)
        store.models.write_bytes(f"exports/{run_id}-step00000020/model.safetensors", b"w" * 1000)
    data = provider.volume("data")
    later = time.time() + 2 * GC_GRACE_S
    young = collect_garbage(store, data, dry_run=True)
    assert not [p for p in young.paths if p.startswith("exports/")]  # a job may still be writing it
    removed = collect_garbage(store, data, now=later).paths
    assert sorted(p for p in removed if p.startswith("exports/")) == [
        f"exports/{deleted.id}",
        f"exports/{deleted.id}-step00000020",
    ]
    assert store.models.exists(f"exports/{kept.id}/model.safetensors")
    assert not store.models.exists(f"exports/{deleted.id}")
