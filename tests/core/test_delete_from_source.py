"""A run's model is not removed while another run trains `--from` it (its adapter is read at start and resume)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import ConflictError
from trainkit_core.ids import new_run_id
from trainkit_core.runs.retention import delete_model, delete_run
from trainkit_core.runs.training_run import RunStore, TrainingRun


def _run(store: RunStore, status: str, **config: str) -> TrainingRun:
    run = TrainingRun(id=new_run_id(), created_at=time.time(), status=status, config=dict(config))
    run.attach(store).save()
    return run


@pytest.fixture
def store(trainkit_home: Path) -> RunStore:
    return RunStore.for_provider(get_provider("local"))


@pytest.mark.parametrize("start", ["trained/{id}", "trained/{id}/checkpoints/20"])
def test_deleting_the_source_of_a_running_from_run_is_refused_naming_it(store: RunStore, start: str) -> None:
    source = _run(store, "succeeded")
    store.models.write_bytes(f"trained/{source.id}/adapter_model.safetensors", b"weights")
    dependent = _run(store, "running", from_model=start.format(id=source.id))
    _run(store, "succeeded", from_model=f"trained/{source.id}")  # a finished one does not hold it
    for remove in (lambda: delete_run(store, source.id), lambda: delete_model(store, f"trained/{source.id}")):
        with pytest.raises(ConflictError, match=dependent.id) as refused:
            remove()
        assert "--from" in refused.value.message
    assert store.models.exists(f"trained/{source.id}/adapter_model.safetensors")
    assert store.get(source.id).status == "succeeded"
    # Keeping the model, the record may go; once the dependent ended, the model may go too.
    dependent.status = "succeeded"
    dependent.save()
    delete_run(store, source.id)
    assert not store.models.exists(f"trained/{source.id}")


def test_a_pending_or_preempted_from_run_holds_its_source_too(store: RunStore) -> None:
    for status in ("pending", "preempted"):
        source = _run(store, "succeeded")
        waiting = _run(store, status, from_model=f"trained/{source.id}")
        with pytest.raises(ConflictError, match=waiting.id):
            delete_run(store, source.id)
        delete_run(store, source.id, keep_model=True)  # the model, which it reads, stays
