"""Submitting and resuming runs, the progress reporter and sweep grids, without torch.

Everything runs against the real `local` provider (SQLite, directories); no job is
spawned where a test only checks what is refused.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import ConflictError, MissingExtraError, NotFoundError, UsageError
from trainkit_core.ids import new_run_id
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.progress import Reporter
from trainkit_core.training.submit import resume_run, start_run
from trainkit_core.training.sweep import compare, expand_grid, sweep_configs

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture
def provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(tmp_path / "datasets"))
    return get_provider("local")


def _record(provider, **fields) -> TrainingRun:  # type: ignore[no-untyped-def]
    store = RunStore.for_provider(provider)
    run = TrainingRun(id=new_run_id(), created_at=time.time(), config={"dataset": "demo", "steps": 10}, **fields)
    run.attach(store).save()
    return run


# Torch-free: the dataset is checked (`check_request`) before the provider's train-extra check.
def test_unknown_dataset_is_refused_and_leaves_no_run(provider) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NotFoundError, match="no dataset 'nope'"):
        start_run(provider, TrainConfig(dataset="nope"))
    assert RunStore.for_provider(provider).list() == []


@pytest.mark.skipif(HAS_TORCH, reason="only without the training stack")
def test_without_the_train_extra_start_run_names_it_and_leaves_no_run(provider) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MissingExtraError, match="torch") as err:
        start_run(provider, TrainConfig(dataset="demo"))
    assert "trainkit-core[train]" in str(err.value)
    assert RunStore.for_provider(provider).list() == []


def test_an_invalid_config_dict_is_refused_before_anything(provider) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match="steps"):
        start_run(provider, {"dataset": "demo", "steps": -3})
    assert RunStore.for_provider(provider).list() == []


def test_resume_refuses_a_running_run(provider) -> None:  # type: ignore[no-untyped-def]
    run = _record(provider, status="running", call_id="")
    with pytest.raises(ConflictError, match="still running"):
        resume_run(provider, run.id)


def test_resume_needs_a_complete_checkpoint(provider) -> None:  # type: ignore[no-untyped-def]
    run = _record(provider, status="failed")
    models = provider.volume("models")
    models.write_bytes(f"trained/{run.id}/checkpoints/00000005/adapter_config.json", b"{}")  # no `done` marker
    with pytest.raises(ConflictError, match="no complete checkpoint"):
        resume_run(provider, run.id)
    assert run.reload().status == "failed"


def test_resume_steps_must_go_beyond_the_checkpoint(provider) -> None:  # type: ignore[no-untyped-def]
    run = _record(provider, status="stopped")
    provider.volume("models").write_bytes(f"trained/{run.id}/checkpoints/00000008/done", b"")
    with pytest.raises(UsageError, match="not beyond the checkpoint at step 8"):
        resume_run(provider, run.id, steps=8)


def test_reporter_throttles_events_keeps_first_and_last_and_sees_the_stop_flag(provider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = _record(provider, status="running")
    extras: list[int] = []
    reporter = Reporter(
        run,
        models_root=tmp_path / "models",
        save_checkpoint_extras=lambda folder, step: extras.append(step),
        commit=lambda: None,
        event_interval_s=3600,
    )
    reporter.train_begin(0, 5)
    for step in range(1, 6):
        reporter.log(
            step, 5, {"loss": 6.0 - step, "learning_rate": 0.01, "grad_norm": 1.0, "epoch": step / 5}, 100 * step
        )
    progress = [e for e in run.events.read() if e["type"] == "progress"]
    assert [e["step"] for e in progress] == [1, 5]  # the first, then the last; the rest held back
    assert [s for s, _ in progress[1]["losses"]] == [2, 3, 4, 5]  # but every step's loss is kept
    assert progress[-1]["loss"] == 1.0 and progress[-1]["tokens_per_s"] > 0 and progress[-1]["memory_mb"] > 0
    assert not reporter.should_stop()
    run.close("enough")
    deadline = time.monotonic() + 30  # read by a background thread: seen within a poll
    while not reporter.should_stop():
        assert time.monotonic() < deadline, "the stop request was never seen"
        time.sleep(0.01)
    reporter.close()
    assert run.events.read()[-1]["message"].startswith("stop requested")


def test_reporter_copies_a_checkpoint_with_the_done_marker_last(provider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = _record(provider, status="running")
    models_root = Path(provider.volume("models").root)  # type: ignore[attr-defined]
    scratch = tmp_path / "checkpoint-7"
    scratch.mkdir()
    (scratch / "optimizer.pt").write_bytes(b"state")
    reporter = Reporter(
        run,
        models_root=models_root,
        save_checkpoint_extras=lambda folder, step: (folder / "trained_model.json").write_text("{}"),
        commit=lambda: None,
    )
    path = reporter.checkpoint_saved(scratch, 7)
    assert path == f"trained/{run.id}/checkpoints/00000007"
    assert [c.step for c in run.checkpoints()] == [7]
    assert (models_root / path / "optimizer.pt").read_bytes() == b"state"
    assert not scratch.exists()
    assert run.events.read()[-1]["type"] == "checkpoint"


def test_sweep_grid_expands_and_suggests_misspelt_fields() -> None:
    assert expand_grid(["lr=1e-3,1e-2", "lora_r=4,8"]) == [
        {"learning_rate": "1e-3", "lora_r": "4"},
        {"learning_rate": "1e-3", "lora_r": "8"},
        {"learning_rate": "1e-2", "lora_r": "4"},
        {"learning_rate": "1e-2", "lora_r": "8"},
    ]
    with pytest.raises(UsageError, match="did you mean 'lora_r'"):
        expand_grid(["lora_rr=4"])
    with pytest.raises(UsageError, match="name=value1,value2"):
        expand_grid(["lr"])
    configs = sweep_configs({"dataset": "demo", "steps": 5}, ["lr=1e-3,1e-2"])
    assert [c.learning_rate for _, c in configs] == [1e-3, 1e-2]
    with pytest.raises(UsageError, match="combination"):
        sweep_configs({"dataset": "demo"}, ["steps=5,-1"])


def test_compare_sorts_by_final_loss(provider) -> None:  # type: ignore[no-untyped-def]
    a = _record(
        provider, status="succeeded", metrics={"first_loss": 7.0, "final_loss": 2.0}, metadata={"sweep": {"lr": "1"}}
    )
    b = _record(
        provider, status="succeeded", metrics={"first_loss": 7.0, "final_loss": 0.5}, metadata={"sweep": {"lr": "2"}}
    )
    c = _record(provider, status="failed")
    assert [row["run_id"] for row in compare([a, b, c])] == [b.id, a.id, c.id]
