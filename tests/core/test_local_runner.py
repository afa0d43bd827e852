"""Local job calls are detached processes: they outlive their caller, can be cancelled and can die.

The conformance suite covers the common behaviour; this module covers what only a
process-based runner has: pids, signals, process groups, logs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import JobError, UsageError
from trainkit_core.local.runner import LocalRunHandle, alive
from trainkit_core.settings import Settings, VolumeSettings


def child(operation: str, env: dict[str, str], **args: Any) -> Any:
    """One operation of the conformance suite's child, in a process that then exits."""
    done = subprocess.run(
        [sys.executable, "-m", "trainkit_core.testing.child", operation, json.dumps({"provider": "local", **args})],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def wait_running(handle: LocalRunHandle) -> None:
    deadline = time.monotonic() + 60
    while handle.status().state != "running" or handle.pid is None:
        assert time.monotonic() < deadline, handle.status()
        time.sleep(0.05)


def wait_done(handle: LocalRunHandle, within: float) -> Any:
    deadline = time.monotonic() + within
    while not (status := handle.status()).done:
        assert time.monotonic() < deadline, f"call still {status.state} after {within} s"
        time.sleep(0.1)
    return status


@pytest.fixture
def local():
    return get_provider("local", Settings.from_env())


@pytest.mark.slow
def test_call_outlives_its_starter_and_is_found_by_another_process(
    cli_env: dict[str, str], local, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    kwargs = {"seconds": 300, "until_file": str(release), "result": {"done": True}}
    call_id = child("spawn", cli_env, function="sleep", kwargs=kwargs)
    # The process that started the call has exited; another one finds it running...
    assert child("call_status", cli_env, call_id=call_id) == {"state": "running", "error": None}
    release.touch()
    # ...and another waits for it and reads its result.
    assert child("call_wait", cli_env, call_id=call_id, timeout=60) == {"result": {"done": True}, "state": "succeeded"}
    status = local.call(call_id).status()
    assert status.exit_code == 0 and status.started_at <= status.ended_at


def test_cancel_ends_the_process_group(local) -> None:
    handle = local.spawn("sleep", seconds=120)
    wait_running(handle)
    record = handle.record()
    handle.cancel()
    assert handle.status().state == "cancelled"
    assert not alive(record["pid"], record["pid_start"])
    assert not alive(record["supervisor_pid"], record["supervisor_start"])
    with pytest.raises(JobError, match="cancelled"):
        handle.wait(timeout=5)


def test_cancel_kills_a_job_that_ignores_sigterm_after_the_grace_period(local) -> None:
    handle = local.spawn("sleep", seconds=120, ignore_sigterm=True)
    wait_running(handle)
    record = handle.record()
    handle.cancel(grace_s=1.0)
    assert handle.status().state == "cancelled"
    assert not alive(record["pid"], record["pid_start"])
    assert not alive(record["supervisor_pid"], record["supervisor_start"])


def test_kill_9_of_the_worker_is_reported_as_failed_with_the_signal(local) -> None:
    handle = local.spawn("sleep", seconds=120)
    wait_running(handle)
    os.kill(handle.pid, signal.SIGKILL)
    with pytest.raises(JobError, match="SIGKILL"):
        handle.wait(timeout=10)
    status = handle.status()
    assert status.state == "failed" and status.exit_code == -9
    assert "signal 9" in status.error


def test_kill_9_of_the_whole_process_group_ends_as_failed(local) -> None:
    handle = local.spawn("sleep", seconds=120)
    wait_running(handle)
    record = handle.record()
    os.killpg(record["supervisor_pid"], signal.SIGKILL)
    status = wait_done(handle, within=10)
    assert status.state == "failed"
    assert "vanished" in status.error


def test_logs_hold_what_the_job_printed(local) -> None:
    handle = local.spawn("fail", message="look in the log")
    with pytest.raises(JobError):
        handle.wait(timeout=60)
    logs = handle.logs()
    assert f"call {handle.call_id}" in logs
    assert "RuntimeError: look in the log" in logs


def test_a_job_gets_the_settings_object_not_only_the_environment(trainkit_home) -> None:
    settings = Settings.from_env().model_copy(update={"volumes": VolumeSettings(vol_data="other-data")})
    result = get_provider("local", settings).spawn("ping").wait(timeout=60)
    assert result["volumes"]["data"]["path"] == str(trainkit_home / "volumes" / "other-data")


def test_arguments_that_are_not_json_are_refused_before_anything_starts(local) -> None:
    with pytest.raises(UsageError, match="JSON"):
        local.spawn("sleep", seconds=0, result={1, 2})
    assert local.kv("_calls").keys() == []
