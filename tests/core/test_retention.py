"""Deleting runs and models, and `gc`, on the local provider's real volumes and SQLite (torch-free)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import ConflictError, NotFoundError, UsageError
from trainkit_core.runs.retention import GC_GRACE_S, collect_garbage, delete_model, delete_run, unfinished_deletes
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import ProviderSettings, Settings


@pytest.fixture
def provider(trainkit_home: Path) -> Any:
    return get_provider("local", Settings(provider=ProviderSettings(home=trainkit_home)))


@pytest.fixture
def store(provider: Any) -> RunStore:
    return RunStore.for_provider(provider)


def _disk(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def _finished_run(store: RunStore, run_id: str, status: str = "succeeded", **fields: Any) -> TrainingRun:
    """A run as a finished job leaves it: record, events, history, model, checkpoints, an export."""
    run = TrainingRun(id=run_id, provider="local", status=status, created_at=time.time(), **fields).attach(store)
    run.save()
    for step in (1, 2, 3):
        run.events.append("progress", step=step, loss=3.0 / step)
    store.stop_flag(run_id).request("done")
    run.write_history()
    models = store.models
    models.write_bytes(f"trained/{run_id}/adapter_model.safetensors", b"w" * 1000)
    models.write_bytes(f"trained/{run_id}/trained_model.json", b"{}")
    for step in (10, 20):
        models.write_bytes(f"trained/{run_id}/checkpoints/{step:08d}/adapter_model.safetensors", b"c" * 300)
        models.write_bytes(f"trained/{run_id}/checkpoints/{step:08d}/done", b"")
    models.write_bytes(f"exports/{run_id}/model.safetensors", b"m" * 5000)
    return run


def _leftovers(store: RunStore, provider: Any, run_id: str) -> list[str]:
    found = [
        f"kv {ns}: {k}"
        for ns in ("runs", "events", "control", "deleting")
        for k in provider.kv(ns).keys(run_id)
        if run_id in k
    ]
    root = Path(store.models.root)  # type: ignore[attr-defined]
    return found + [str(p.relative_to(root)) for p in root.rglob(f"*{run_id}*")]


RUN = "run-20261201-010203-abcdef"
OTHER = "run-20261201-010204-bcdef0"


def test_delete_frees_the_bytes_it_reports_and_dry_run_removes_nothing(store: RunStore, provider: Any) -> None:
    _finished_run(store, RUN)
    _finished_run(store, OTHER)
    root = Path(store.models.root)  # type: ignore[attr-defined]
    before = _disk(root)
    dry = delete_run(store, RUN, dry_run=True)
    assert _disk(root) == before and store.get(RUN).status == "succeeded"
    assert dry.paths == [f"trained/{RUN}", f"exports/{RUN}", f"runs/{RUN}"]
    assert dry.kv_keys == len([k for k in _leftovers(store, provider, RUN) if k.startswith("kv ")]) >= 5

    done = delete_run(store, RUN)
    assert done.bytes == dry.bytes == before - _disk(root) > 6000
    assert _leftovers(store, provider, RUN) == []
    with pytest.raises(NotFoundError):
        store.get(RUN)
    assert [r.id for r in store.list()] == [OTHER]  # the other run untouched
    assert len(store.get(OTHER).events.read()) == 3

    kept = delete_run(store, OTHER, keep_model=True)
    assert kept.paths == [f"runs/{OTHER}"] and store.models.exists(f"trained/{OTHER}/adapter_model.safetensors")


class _DiesMidway:
    """The models volume of a process killed during a delete: the second removal never happens."""

    def __init__(self, volume: Any) -> None:
        self._volume = volume
        self.removals = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._volume, name)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        self.removals += 1
        if self.removals == 2:
            raise KeyboardInterrupt
        self._volume.remove(path, recursive=recursive)


def test_an_interrupted_delete_is_finished_by_the_next(store: RunStore, provider: Any) -> None:
    _finished_run(store, RUN)
    first = delete_run(store, RUN, keep_model=False, dry_run=True)
    dying = RunStore(provider.kv, _DiesMidway(store.models), provider)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        delete_run(dying, RUN)
    assert not store.models.exists(f"trained/{RUN}") and store.models.exists(f"exports/{RUN}")
    assert unfinished_deletes(store) == [RUN]

    again = delete_run(store, RUN, keep_model=True)  # the first delete's options win
    assert again.resumed and again.paths == [f"exports/{RUN}", f"runs/{RUN}"]
    assert again.bytes < first.bytes
    assert _leftovers(store, provider, RUN) == [] and unfinished_deletes(store) == []


def test_a_running_run_is_refused_with_the_reason(store: RunStore, provider: Any) -> None:
    _finished_run(store, RUN, status="running", phase="training")
    with pytest.raises(ConflictError, match=r"is running \(phase training\)") as caught:
        delete_run(store, RUN)
    assert "trainkit runs stop" in (caught.value.hint or "")
    with pytest.raises(ConflictError, match="still writing"):
        delete_model(store, f"trained/{RUN}")
    assert store.get(RUN).status == "running" and store.models.exists(f"trained/{RUN}")
    assert unfinished_deletes(store) == []
    with pytest.raises(NotFoundError):
        delete_run(store, OTHER)


def test_models_rm_removes_a_checkpoint_or_an_export(store: RunStore) -> None:
    _finished_run(store, RUN)
    ckpt = f"trained/{RUN}/checkpoints/00000010"
    assert delete_model(store, ckpt, dry_run=True).bytes == 300 and store.models.exists(ckpt)
    assert delete_model(store, ckpt).bytes == 300 and not store.models.exists(ckpt)
    assert [c.step for c in store.get(RUN).checkpoints()] == [20]
    assert delete_model(store, f"exports/{RUN}").bytes == 5000
    with pytest.raises(NotFoundError):
        delete_model(store, f"exports/{RUN}")
    with pytest.raises(UsageError, match=r"not under trained"):
        delete_model(store, "datasets/demo")


def _dataset(folder: Path, answer: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.toml").write_text('name = "shout"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": answer}]}
    (folder / "train.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def test_gc_keeps_current_and_used_versions_and_frees_the_rest(store: RunStore, provider: Any, tmp_path: Path) -> None:
    from trainkit_core.datasets.sync import sync_to_volume

    data = provider.volume("data")
    first = sync_to_volume(data, _dataset(tmp_path / "shout", "HI"))
    second = sync_to_volume(data, _dataset(tmp_path / "shout", "HELLO"))
    third = sync_to_volume(data, _dataset(tmp_path / "shout", "HEY"))
    _finished_run(store, RUN, dataset_hash=second.hash)
    root = Path(data.root)  # type: ignore[attr-defined]
    later = time.time() + 2 * GC_GRACE_S

    now = collect_garbage(store, data, dry_run=True).paths
    assert not [p for p in now if "/blobs/" in p]  # a blob younger than the grace period may be a sync's
    dry = collect_garbage(store, data, dry_run=True, now=later)
    versions = f"datasets/shout/versions/{first.version}"
    assert versions in dry.paths and not any(second.version in p or third.version in p for p in dry.paths)
    assert len([p for p in dry.paths if "/blobs/" in p]) == 1  # the first version's only own file

    before = _disk(root)
    done = collect_garbage(store, data, now=later)
    assert done.bytes == dry.bytes == before - _disk(root) > 0
    assert collect_garbage(store, data, now=later).paths == []

    assert data.exists(f"datasets/shout/versions/{third.version}/manifest.json")
    assert data.exists(f"datasets/shout/versions/{second.version}/manifest.json")  # a run used it


def test_gc_removes_incomplete_checkpoints_of_finished_runs_only(store: RunStore) -> None:
    _finished_run(store, RUN)
    _finished_run(store, OTHER, status="running")
    for run_id in (RUN, OTHER):
        store.models.write_bytes(f"trained/{run_id}/checkpoints/00000030/adapter_model.safetensors", b"x" * 70)
    done = collect_garbage(store, store.models, now=time.time() + 2 * GC_GRACE_S)
    assert done.paths == [f"trained/{RUN}/checkpoints/00000030"] and done.bytes == 70
    assert store.models.exists(f"trained/{OTHER}/checkpoints/00000030")


def test_gc_removes_what_a_dead_export_job_left_once_nothing_writes_to_it(store: RunStore) -> None:
    _finished_run(store, RUN)
    models = store.models
    models.write_bytes(f"exports/{RUN}/model.safetensors", b"m" * 50)  # a finished export: kept
    models.write_bytes("exports/.partial-0123456789ab/model-00001-of-00002.safetensors", b"t" * 40)  # killed mid-merge
    models.write_bytes("exports/.replaced-ba9876543210/model.safetensors", b"o" * 9)  # killed while replacing
    assert collect_garbage(store, store.models).paths == []  # written just now: a job may still be at work
    done = collect_garbage(store, store.models, now=time.time() + 2 * GC_GRACE_S)
    assert (
        sorted(done.paths) == ["exports/.partial-0123456789ab", "exports/.replaced-ba9876543210"] and done.bytes == 49
    )
    assert not models.exists("exports/.partial-0123456789ab") and not models.exists("exports/.replaced-ba9876543210")
    assert models.read_bytes(f"exports/{RUN}/model.safetensors") == b"m" * 50


@pytest.mark.parametrize(
    ("steps", "keep", "current", "losses", "removed"),
    [
        ([10, 20, 30], 2, 40, {}, [10, 20]),
        ([10, 20, 30], 1, 40, {10: 1.0, 20: 0.5, 30: 0.9, 40: 0.7}, [10, 30]),  # 20 is the best
        ([10, 20, 30], 1, 40, {10: 1.0, 20: 0.9, 30: 0.8, 40: 0.7}, [10, 20, 30]),  # the newest is the best
        ([10], 3, 20, {}, []),
    ],
)
def test_keep_checkpoints_removes_all_but_the_last_and_the_best(
    steps: list[int], keep: int, current: int, losses: dict[int, float], removed: list[int]
) -> None:
    from trainkit_core.training.keep import checkpoints_to_remove

    assert checkpoints_to_remove(steps, keep, current, losses) == removed
