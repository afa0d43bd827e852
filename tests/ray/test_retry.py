"""A training job whose process is SIGKILLed is started again by Ray and resumes from its checkpoint."""

from __future__ import annotations

import os
import re
import signal
from typing import Any

import pytest
from ray_helpers import RayEnv, mini_dataset, wait_for

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(900)]


def test_a_killed_job_is_retried_from_its_checkpoint_then_stops_on_request(
    tmp_path_factory: pytest.TempPathFactory, ray_cluster: Any
) -> None:
    datasets = tmp_path_factory.mktemp("datasets")
    mini_dataset(datasets)
    env = RayEnv(tmp_path_factory.mktemp("home"), datasets, ray_cluster.address)
    started = env.cli(
        "train", "--dataset", "mini", "--steps", "100000", "--save-every", "5", "--batch-size", "4", "--detach"
    )
    run_id = re.search(r"(run-\S+)", started.stdout).group(1)  # type: ignore[union-attr]
    wait_for(lambda: [c.step for c in env.run(run_id).checkpoints()], 300, "the first checkpoint")
    run = env.run(run_id)
    handle = env.provider().call(run.call_id)
    first_pid = handle.pid
    assert first_pid and env.run(run_id).status == "running"
    os.kill(first_pid, signal.SIGKILL)

    # Ray creates the detached actor again (a new process); the job counts the attempt and resumes.
    wait_for(lambda: handle.pid not in (None, first_pid), 120, "the actor's second process")
    resumed = wait_for(
        lambda: [e for e in env.run(run_id).events.read() if "the job was restarted" in e.get("message", "")],
        300,
        "the restarted attempt",
    )
    assert "attempt 2" in resumed[0]["message"]
    run = env.run(run_id)
    assert run.call_attempts == 2 and run.max_attempts == 3
    checkpoint = max(c.step for c in run.checkpoints())
    wait_for(lambda: env.run(run_id).step > checkpoint, 300, "steps after the resume")
    after = [e for e in env.run(run_id).events.read() if e["type"] == "progress" and e["time"] > resumed[0]["time"]]
    assert after and after[0]["step"] > 1, "the second attempt started from scratch, not from the checkpoint"

    # A graceful stop through the store ends the run and then the call, with no restart.
    env.cli("runs", "stop", run_id)
    wait_for(lambda: env.run(run_id).status == "stopped", 300, "the stopped run")
    wait_for(lambda: handle.status().done, 60, "the call's end")
    assert handle.status().state == "succeeded" and handle.record()["attempts"] == 2
    assert f"attempt 2 pid {handle.pid}" in handle.logs()
