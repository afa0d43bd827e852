"""The `train` job's bookkeeping around training: restarts, duplicates, preemption.

Torch-free: `_train` (the part that imports torch) is replaced by a function that
stands for what happens while training (returns, or gets SIGINT); everything else (the
local provider's job context, SQLite records, events, the models volume) is real.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from trainkit_core.errors import JobError
from trainkit_core.ids import new_run_id
from trainkit_core.local.plugin import job_context
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import Settings
from trainkit_core.testing.slow_kv import slow_factory
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


def test_attempts_before_the_last_leave_the_run_resumable(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A provider that retries (ctx.max_attempts = 2): attempt 1's error is kept, only the last fails the run."""
    ctx.max_attempts = 2
    run = _run(ctx, status="pending")
    calls: list[bool] = []

    def broken(ctx: Any, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
        calls.append(resume)
        raise RuntimeError(f"boom {len(calls)}")

    monkeypatch.setattr(job, "_train", broken)
    with pytest.raises(RuntimeError, match="boom 1"):
        job.train(ctx, run.id)
    stored = run.reload()
    assert stored.status == "pending" and not stored.done()
    assert stored.error_message == "RuntimeError: boom 1"
    assert (stored.call_attempts, stored.max_attempts, stored.attempt_call_id) == (1, 2, "lc-test")
    assert stored.call_id == "lc-test"  # no submitter noted the call: the job did, for cancel and the reconciler

    with pytest.raises(RuntimeError, match="boom 2"):
        job.train(ctx, run.id)  # the provider's retry: same call
    stored = run.reload()
    assert stored.status == "failed" and stored.error_message == "RuntimeError: boom 2"
    assert stored.call_attempts == 2 and calls == [False, True]  # the retry resumed

    # Any later retry of that call fails at once, without training: the call ends as the run did.
    with pytest.raises(JobError, match="boom 2"):
        job.train(ctx, run.id)
    assert len(calls) == 2


def test_a_restart_over_the_cap_fails_the_run(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Crashes leave no word: the record still says running; the attempt over the cap gives up."""
    ctx.max_attempts = 2
    run = _run(ctx, status="running", attempt_call_id="lc-test", call_attempts=2, max_attempts=2)
    monkeypatch.setattr(job, "_train", lambda *a, **k: pytest.fail("trained over the cap"))
    with pytest.raises(JobError, match="gave up after 2 attempt"):
        job.train(ctx, run.id)
    stored = run.reload()
    assert stored.status == "failed" and stored.call_attempts == 3


def test_a_preempted_attempt_is_not_counted(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    ctx.max_attempts = 2
    run = _run(ctx, status="preempted", attempt_call_id="lc-test", call_attempts=2, max_attempts=2)

    def done(ctx: Any, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
        job._end(ctx, run, "succeeded")
        return "succeeded"

    monkeypatch.setattr(job, "_train", done)
    assert job.train(ctx, run.id)["status"] == "succeeded"
    assert run.reload().call_attempts == 2


def test_a_new_call_counts_its_own_attempts(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A resume is a new call: the attempts of the old one do not count against it."""
    run = _run(ctx, status="pending", attempt_call_id="lc-old", call_attempts=3, max_attempts=3)

    def done(ctx: Any, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
        job._end(ctx, run, "succeeded")
        return "succeeded"

    monkeypatch.setattr(job, "_train", done)
    job.train(ctx, run.id, resume=True)
    stored = run.reload()
    assert (stored.attempt_call_id, stored.call_attempts, stored.max_attempts) == ("lc-test", 1, 1)


class _RefusingKV:
    """A store whose writes fail while `refusing` is set (a Dict that is down), reads still work."""

    def __init__(self, inner: Any, state: dict[str, bool]) -> None:
        self.inner = inner
        self.namespace = inner.namespace
        self.state = state

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name in ("put", "put_many", "put_if_absent", "delete"):

            def refused(*args: Any, **kwargs: Any) -> Any:
                if self.state["refusing"]:
                    raise ConnectionError(f"store unavailable ({self.namespace}.{name})")
                return method(*args, **kwargs)

            return refused
        return method


def test_the_job_waits_for_a_slow_store_only_to_start_and_to_end(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Phases, events and record saves inside the job are queued; the job returns with all of them stored."""
    calls: Counter[str] = Counter()
    plain = ctx.kv_factory
    ctx.kv_factory = slow_factory(plain, delay_s=0.02, calls=calls)
    run = _run(ctx, status="pending")
    me = threading.current_thread().name
    seen: dict[str, int] = {}

    def work(ctx: Any, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
        before = calls[me]
        for phase in ("loading_model", "loading_dataset", "training"):
            run.enter_phase(phase)
            run.events.append("log", message=f"working in {phase}")
        for step in range(1, 41):
            run.step = step
            run.save()
        seen["calls"] = calls[me] - before
        job._end(ctx, run, "succeeded")
        return "succeeded"

    monkeypatch.setattr(job, "_train", work)
    assert job.train(ctx, run.id)["status"] == "succeeded"
    assert seen["calls"] == 0, "a phase, an event or a save inside the job waited for the store"
    assert run.writer is None  # saves write directly again after the job

    stored = RunStore(plain, RunStore.for_job(ctx).models).get(run.id)  # another process's view
    assert (stored.status, stored.phase, stored.step) == ("succeeded", "done", 40)
    events = stored.events.read()
    assert [e["message"] for e in events if e["type"] == "log"] == [
        f"working in {phase}" for phase in ("loading_model", "loading_dataset", "training")
    ]
    assert events[-1]["type"] == "status" and events[-1]["status"] == "succeeded"
    history = RunStore.for_job(ctx).models.read_bytes(f"runs/{run.id}/events.jsonl").decode().splitlines()
    assert len(history) == len(events)  # the history holds every event, the last status included
    assert [r.id for r in RunStore(plain, RunStore.for_job(ctx).models).list(status="succeeded")] == [run.id]


def test_a_store_refusing_the_end_fails_the_call_and_a_retry_resumes(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The end's record is written before the job returns: a store that refuses it fails the call, never silently."""
    state = {"refusing": False}
    plain = ctx.kv_factory
    ctx.kv_factory = lambda namespace: _RefusingKV(plain(namespace), state)
    ctx.max_attempts = 2
    run = _run(ctx, status="pending")

    def work(ctx: Any, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
        state["refusing"] = True  # the store goes down mid-run
        job._end(ctx, run, "succeeded")
        return "succeeded"

    monkeypatch.setattr(job, "_train", work)
    with pytest.raises(ConnectionError, match="store unavailable"):
        job.train(ctx, run.id)
    state["refusing"] = False
    stored = RunStore(plain, RunStore.for_job(ctx).models).get(run.id)
    assert stored.status == "running" and not stored.done()  # as last written: the provider's retry resumes

    def done(ctx: Any, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
        job._end(ctx, run, "succeeded")
        return "succeeded"

    monkeypatch.setattr(job, "_train", done)
    assert job.train(ctx, run.id)["status"] == "succeeded"
    assert run.reload().status == "succeeded" and run.reload().attempt == 2
