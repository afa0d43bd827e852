"""Seed 002's `TrainingRun` contract as a Python API: names, loading, waiting, async, timings.

Torch-free. The local provider (SQLite records, a detached `sleep` job), the job's
bookkeeping (`training.job.train` with `_train` standing for the training) and the
stores are real; a test clock stands for the wall clock where durations are checked.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import JobError, JobTimeout, UsageError
from trainkit_core.ids import new_run_id
from trainkit_core.local.plugin import job_context
from trainkit_core.runs.training_run import RunStore, TrainingRun, wait_all
from trainkit_core.settings import Settings
from trainkit_core.training import job


class Clock:
    """A test clock: `time()` answers what the test says."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def store() -> RunStore:
    return RunStore.for_provider(get_provider("local"))


def _new(store: RunStore, **fields: Any) -> TrainingRun:
    run = TrainingRun(id=new_run_id(), created_at=time.time(), config={"dataset": "demo"}, **fields)
    run.attach(store).save()
    return run


# --------------------------------------------------------------------------- names and loading


def test_from_id_uses_the_configured_providers_store_by_default(store: RunStore) -> None:
    run = _new(store, status="running")
    loaded = TrainingRun.from_id(run.id)
    assert loaded.id == run.id and loaded.status == "running"
    assert loaded.store.provider is not None and loaded.store.provider.name == "local"
    assert asyncio.run(TrainingRun.from_id.aio(run.id)).id == run.id
    assert asyncio.run(TrainingRun.from_id(run.id, is_async=True)).id == run.id  # the seed's spelling


def test_the_seeds_names_are_read_written_and_stored(store: RunStore) -> None:
    run = _new(store, phase="training")
    assert run.training_run_id == run.id and run.framework_status == "training"
    run.framework_status = "saving"
    assert run.phase == "saving"
    run.save()
    stored = store.records.get(run.id)
    assert stored["training_run_id"] == stored["id"] == run.id
    assert stored["framework_status"] == stored["phase"] == "saving"
    run.write_history()
    history = json.loads(store.models.read_bytes(f"runs/{run.id}/record.json"))
    assert history["training_run_id"] == run.id and history["framework_status"] == "saving"

    # A record written with the seed's names only loads; disagreeing names are refused.
    seed_only = {"training_run_id": "run-20261201-010203-abcdef", "framework_status": "training"}
    loaded = TrainingRun.from_stored_data(json.dumps(seed_only))
    assert (loaded.id, loaded.phase) == ("run-20261201-010203-abcdef", "training")
    with pytest.raises(UsageError, match="training_run_id 'b' disagrees with id 'a'"):
        TrainingRun.from_stored_data({"id": "a", "training_run_id": "b"})


def test_the_call_id_and_base_model_keep_the_seeds_names(store: RunStore) -> None:
    """`function_call_id` is `call_id`, `source_model` is `base_model`: both stored, either loads alone."""
    run = _new(store, status="pending", function_call_id="lc-1", source_model="trainkit/tiny-gemma")
    assert (run.call_id, run.base_model) == ("lc-1", "trainkit/tiny-gemma")
    stored = store.records.get(run.id)
    assert stored["call_id"] == stored["function_call_id"] == "lc-1"
    assert stored["base_model"] == stored["source_model"] == "trainkit/tiny-gemma"
    # A job's copy read before the submitter noted the call: its save keeps the stored call id,
    # and carries the seed's spelling along, so the next load does not find them disagreeing.
    job_copy = TrainingRun.from_id(run.id, store=store)
    job_copy.call_id = ""
    stored_now = store.records.get(run.id)
    stored_now["call_id"] = stored_now["function_call_id"] = ""
    store.records.put(run.id, stored_now)
    run.update_shared(lambda r: setattr(r, "call_id", "lc-2"))
    job_copy.step = 3
    job_copy.save()
    again = TrainingRun.from_id(run.id, store=store)
    assert (again.call_id, again.function_call_id, again.step) == ("lc-2", "lc-2", 3)
    assert TrainingRun.from_stored_data({"id": run.id, "function_call_id": "fc-9"}).call_id == "fc-9"
    run.function_call_id = "lc-3"
    assert run.call_id == "lc-3"


def test_the_seeds_method_names_do_what_trainkits_do(store: RunStore) -> None:
    """`apply_framework_status` is `advance_phase`, `close` is `stop` (graceful: the stop flag, never the app)."""
    run = _new(store, status="running", phase="training")
    assert run.apply_framework_status("provisioning") is None and run.phase == "training"  # never goes back
    assert run.apply_framework_status("no-such-phase") is None
    assert run.apply_framework_status("saving") == "saving" == run.phase
    assert not store.stop_flag(run.id).is_set()
    run.close("enough")
    assert store.stop_flag(run.id).is_set() and run.status == "running"


# --------------------------------------------------------------------------- result, wait_all, async


def _sleeping_call(store: RunStore, tmp_path: Path) -> tuple[Any, Path]:
    """A real detached job that lives until the test creates its file."""
    until = tmp_path / "end-now"
    handle = store.provider.spawn("sleep", seconds=120, until_file=str(until))
    return handle, until


def test_result_releases_the_job_call_of_a_run_that_succeeded(store: RunStore, tmp_path: Path) -> None:
    handle, until = _sleeping_call(store, tmp_path)
    try:
        # Ended two minutes ago, its call still alive: past the grace a job gets to finish its history.
        run = _new(store, status="succeeded", call_id=handle.call_id, ended_at=time.time() - 120)
        kept = TrainingRun.from_id(run.id, store=store).result(timeout=30, stop_app_on_success=False)
        assert kept.status == "succeeded" and not handle.status().done
        assert run.result(timeout=30) is run
        deadline = time.monotonic() + 60
        while not store.provider.call(handle.call_id).status().done:
            assert time.monotonic() < deadline, "the job call was not ended"
            time.sleep(0.1)
        assert run.release() is False  # nothing left to end
    finally:
        until.touch()


def test_result_raises_for_a_run_that_did_not_succeed(store: RunStore) -> None:
    run = _new(store, status="failed", error_message="RuntimeError: boom")
    with pytest.raises(JobError, match="ended failed: RuntimeError: boom"):
        run.result(timeout=1)
    with pytest.raises(JobError):
        asyncio.run(run.result.aio(timeout=1))


def _finish_later(store: RunStore, run_ids: list[str], delay: float) -> threading.Thread:
    def finish() -> None:
        time.sleep(delay)
        for run_id in run_ids:
            run = store.get(run_id)
            run.status = "succeeded"
            run.save()

    thread = threading.Thread(target=finish)
    thread.start()
    return thread


def test_wait_all_returns_when_every_run_ended(store: RunStore) -> None:
    runs = [_new(store, status="running", call_id="") for _ in range(2)]
    thread = _finish_later(store, [r.id for r in runs], 0.3)
    done = wait_all(runs, poll_interval=0.05, timeout=60)
    thread.join()
    assert [r.status for r in done] == ["succeeded", "succeeded"]


def test_wait_all_gives_up_after_its_timeout_naming_the_runs_left(store: RunStore) -> None:
    first, second = _new(store, status="succeeded"), _new(store, status="running")
    with pytest.raises(JobTimeout, match=f"1 run\\(s\\) still unfinished after 0.2 s: {second.id}"):
        wait_all([first, second], poll_interval=0.05, timeout=0.2)


def test_the_async_twins_wait_without_blocking_the_event_loop(store: RunStore) -> None:
    runs = [_new(store, status="running") for _ in range(2)]

    async def main() -> tuple[list[TrainingRun], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        thread = _finish_later(store, [r.id for r in runs], 0.3)
        done = await wait_all.aio(runs, poll_interval=0.05, timeout=60)
        first = await runs[0].result.aio(timeout=5)
        tick.cancel()
        thread.join()
        assert first.status == "succeeded"
        await runs[0].save.aio()
        return done, ticks

    done, ticks = asyncio.run(main())
    assert [r.status for r in done] == ["succeeded", "succeeded"]
    assert ticks > 1  # the loop ran while the runs were awaited


# --------------------------------------------------------------------------- timings after stop, failure, resume


@pytest.fixture
def ctx(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    return job_context(Settings.from_env(), "lc-test")


def test_completed_at_and_duration_after_a_stop_a_failure_and_a_resume(ctx, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    monkeypatch.setattr(job, "time", clock)
    store = RunStore.for_job(ctx)
    run = _new(store, status="pending")
    outcomes: list[str] = []

    def fake_train(ctx: Any, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
        clock.advance(100)
        outcome = outcomes.pop(0)
        if outcome == "raise":
            raise RuntimeError("the tiny model fell over")
        if outcome == "stopped":
            run.store.stop_flag(run.id).request("stopped by the test")
        job._end(ctx, run, outcome)
        return outcome

    monkeypatch.setattr(job, "_train", fake_train)

    outcomes.append("stopped")
    job.train(ctx, run.id)
    stored = run.reload()
    assert (stored.status, stored.stop_reason) == ("stopped", "stopped by the test")
    assert stored.completed_at is None and stored.ended_at == clock.now
    assert stored.duration_seconds == 100 and stored.attempt_started_at is None

    clock.advance(1000)  # the time between a stop and its resume is not the run's
    outcomes.append("succeeded")
    stored.status, stored.ended_at, stored.stop_reason = "pending", None, None  # what resume_run leaves
    stored.save()
    job.train(job_context(Settings.from_env(), "lc-resume"), run.id, resume=True)  # a resume is a new call
    stored = run.reload()
    assert stored.status == "succeeded" and stored.completed_at == stored.ended_at == clock.now
    assert stored.duration_seconds == 200

    failing = _new(store, status="pending")
    outcomes.append("raise")
    with pytest.raises(RuntimeError):
        job.train(ctx, failing.id)
    failed = failing.reload()
    assert failed.status == "failed" and failed.completed_at is None
    assert failed.ended_at == clock.now and failed.duration_seconds == 100


def test_substep_records_its_time_and_whether_it_ended_well(store: RunStore) -> None:
    run = _new(store)
    with run.substep("loading_dataset", "tokenize") as figures:
        figures["examples"] = 3
    with pytest.raises(RuntimeError), run.substep("saving", "adapter_gate"):
        raise RuntimeError("gate")
    entry = run.substep_times["loading_dataset"]["tokenize"]
    assert entry["ok"] is True and entry["examples"] == 3 and entry["end"] >= entry["start"]
    assert run.substep_times["saving"]["adapter_gate"]["ok"] is False


def test_wait_all_is_a_member_of_training_run_as_seed_002_lists_it(store: RunStore) -> None:
    """``TrainingRun.wait_all(runs)`` and its ``.aio`` twin wait as the module function does."""
    runs = [_new(store, status="running", call_id="") for _ in range(2)]
    thread = _finish_later(store, [r.id for r in runs], 0.3)
    done = TrainingRun.wait_all(runs, poll_interval=0.05, timeout=60)
    thread.join()
    assert [r.status for r in done] == ["succeeded", "succeeded"]
    again = asyncio.run(TrainingRun.wait_all.aio(done, poll_interval=0.05, timeout=60))
    assert [r.id for r in again] == [r.id for r in runs]
