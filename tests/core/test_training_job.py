"""The `train` job's bookkeeping around training: restarts, duplicates, preemption.

Torch-free: `_train` (the part that imports torch) is replaced by a function that
stands for what happens while training (returns, or gets SIGINT); everything else (the
local provider's job context, SQLite records, events, the models volume) is real.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_core.ids import new_run_id
from trainkit_core.local.plugin import job_context
from trainkit_core.runs import RunStore, TrainingRun
from trainkit_core.settings import Settings
from trainkit_core.training import job


@pytest.fixture
def ctx(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # restored after the job sets it
    return job_context(Settings.from_env(), "lc-test")


def _run(ctx: Any, **fields: Any) -> TrainingRun:
    run = TrainingRun(id=new_run_id(), created_at=time.time(), config={"dataset": "demo"}, **fields)
    run.attach(RunStore.for_job(ctx)).save()
    return run


def test_a_restarted_input_resumes_and_counts_the_attempt(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    run = _run(ctx, status="running", started_at=time.time() - 60)
    seen: dict[str, Any] = {}

    def fake_train(ctx: Any, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
        seen["resume"] = resume
        job._end(ctx, run, "succeeded")
        return "succeeded"

    monkeypatch.setattr(job, "_train", fake_train)
    result = job.train(ctx, run.id)
    assert seen["resume"] is True
    assert result["status"] == "succeeded"
    stored = run.reload()
    assert stored.attempt == 2 and stored.status == "succeeded" and stored.phase == "done"
    assert any(e["type"] == "warning" and "restarted" in e["message"] for e in stored.events.read())
    assert RunStore.for_job(ctx).models.exists(f"runs/{run.id}/record.json")  # history written at the end


def test_a_finished_run_is_not_trained_again(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    run = _run(ctx, status="succeeded")
    monkeypatch.setattr(job, "_train", lambda *a, **k: pytest.fail("trained a finished run"))
    assert job.train(ctx, run.id) == {"run_id": run.id, "status": "succeeded", "skipped": True}


def test_sigint_ends_the_run_preempted_so_a_restart_resumes(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    run = _run(ctx, status="pending")

    def interrupted(*args: Any, **kwargs: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "_train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        job.train(ctx, run.id)
    stored = run.reload()
    assert stored.status == "preempted" and not stored.done()
    assert "preempted" in (stored.error_message or "")


def test_an_error_fails_the_run_with_its_text_and_keeps_the_events(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    run = _run(ctx, status="pending")

    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("out of memory on the tiny model")

    monkeypatch.setattr(job, "_train", broken)
    with pytest.raises(RuntimeError):
        job.train(ctx, run.id)
    stored = run.reload()
    assert stored.status == "failed"
    assert stored.error_message == "RuntimeError: out of memory on the tiny model"
    statuses = [e["status"] for e in stored.events.read() if e["type"] == "status"]
    assert statuses == ["running", "failed"]
