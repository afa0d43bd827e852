"""A job that dies before writing its history still leaves the run's history on the models volume.

On Modal the key-value store forgets an entry after a week idle: a run's events there are
gone, and the volume's `runs/<id>/` copy is what a reader falls back to. The job writes that
copy when it ends; a job killed (out of memory, kill -9) never does, so the reconciler that
records the death writes it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.ids import new_run_id
from trainkit_core.runs.reconcile import reconcile_run
from trainkit_core.runs.training_run import RunStore, TrainingRun, history_dir


@pytest.mark.slow
def test_a_killed_jobs_run_keeps_its_events_on_the_models_volume(trainkit_home: Path) -> None:
    provider = get_provider("local")
    handle = provider.spawn("sleep", seconds=120, say="job started")
    deadline = time.monotonic() + 60
    while "job started" not in handle.logs() and time.monotonic() < deadline:
        time.sleep(0.1)
    store = RunStore.for_provider(provider)
    run = TrainingRun(id=new_run_id(), created_at=time.time(), status="running", call_id=handle.call_id)
    run.attach(store).save()
    run.events.append("progress", step=1, loss=2.5)
    os.kill(handle.pid, signal.SIGKILL)
    while not handle.status().done and time.monotonic() < deadline:
        time.sleep(0.1)

    assert reconcile_run(run) is True
    assert run.status == "failed" and run.error_message.startswith("the job died")
    base = history_dir(run.id)
    record = json.loads(store.models.read_bytes(f"{base}/record.json"))
    events = [json.loads(line) for line in store.models.read_bytes(f"{base}/events.jsonl").decode().splitlines()]
    assert record["status"] == "failed" and record["error_message"] == run.error_message
    assert [(e["type"], e.get("step")) for e in events][:1] == [("progress", 1)]
    assert events[-1]["type"] == "status" and events[-1]["status"] == "failed"
