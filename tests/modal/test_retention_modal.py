"""`runs delete`, `models rm` and `gc` through the Modal provider's hooks, on the fake Dict and Volume."""

from __future__ import annotations

import time
from types import ModuleType

import pytest
from test_runs_listing import modal_store

from trainkit_core.errors import ConflictError
from trainkit_core.runs.retention import GC_GRACE_S, collect_garbage, delete_model, delete_run
from trainkit_core.runs.training_run import TrainingRun

RUN = "run-20261201-010203-abcdef"


def test_delete_model_rm_and_gc_through_modal_hooks(fake_modal: ModuleType) -> None:
    store = modal_store(fake_modal)
    run = TrainingRun(id=RUN, status="succeeded", created_at=time.time()).attach(store)
    run.save()
    run.events.append("progress", step=1, loss=2.0)
    run.write_history()
    models = store.models
    models.write_bytes(f"trained/{RUN}/adapter_model.safetensors", b"w" * 100)
    models.write_bytes(f"trained/{RUN}/checkpoints/00000010/done", b"")
    models.write_bytes(f"trained/{RUN}/checkpoints/00000010/adapter_model.safetensors", b"c" * 30)
    models.write_bytes(f"trained/{RUN}/checkpoints/00000020/adapter_model.safetensors", b"x" * 7)
    models.write_bytes(f"exports/{RUN}/model.safetensors", b"m" * 50)
    models.write_bytes("exports/.partial-0123456789ab/model.safetensors", b"t" * 11)  # an export killed mid-merge

    assert delete_model(store, f"trained/{RUN}/checkpoints/00000010").bytes == 30
    assert [c.step for c in run.checkpoints()] == []
    garbage = collect_garbage(store, store.provider.volume("data"), now=time.time() + 2 * GC_GRACE_S)
    assert garbage.paths == [f"trained/{RUN}/checkpoints/00000020", "exports/.partial-0123456789ab"]
    assert garbage.bytes == 7 + 11

    running = TrainingRun(id="run-20261201-010204-bcdef0", status="running", created_at=time.time()).attach(store)
    running.save()
    with pytest.raises(ConflictError):
        delete_run(store, running.id)
    history = len(models.read_bytes(f"runs/{RUN}/record.json")) + len(models.read_bytes(f"runs/{RUN}/events.jsonl"))
    removal = delete_run(store, RUN)
    assert removal.bytes == 100 + 50 + history
    assert (
        not models.exists(f"trained/{RUN}") and not models.exists(f"runs/{RUN}") and not models.exists(f"exports/{RUN}")
    )
    assert store.records.get(RUN) is None and store.events(RUN).read() == []
