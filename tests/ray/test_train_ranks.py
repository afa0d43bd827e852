"""One run on 2 Ray Train workers (CPU, gloo) on the loopback cluster, through the CLI.

Ray Train's `TorchTrainer` starts the ranks (`trainkit_ray.train_ranks`); each runs trainkit's
rank code over the shared storage. Compared with a 1-process run of the same global batch on
the same cluster: the same losses and adapter (the tolerance of `tests/core/test_distributed_ml.py`),
one run record whose events say it ran on 2 processes. A killed worker fails the attempt with
its rank named, and the job's next attempt resumes it from its checkpoint. Ray Train with GPUs
(nccl) never ran here.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import RayEnv, mini_dataset, wait_for

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(900)]

TOLERANCE = 1e-3
RECIPE = ("--dataset", "demo", "--model-size", "tiny", "--steps", "4", "--batch-size", "2", "--save-every", "1000")


def _train(env: RayEnv, *extra: str, check: bool = True) -> tuple[str, Any]:
    done = env.cli("--provider", "ray", "train", *RECIPE, "--lr", "1e-3", *extra, check=check)
    found = re.search(r"model: trained/(run-\S+)", done.stdout)
    assert found, done.stdout + done.stderr
    return found.group(1), done


def _adapter(env: RayEnv, run_id: str) -> dict[str, Any]:
    from safetensors.torch import load_file

    path = env.storage / "volumes" / "trainkit-models" / "trained" / run_id / "adapter_model.safetensors"
    return load_file(str(path))


def test_two_ray_train_workers_train_the_same_adapter_as_one_process(env: RayEnv) -> None:
    import torch

    one_id, _ = _train(env)
    two_id, _ = _train(env, "--processes", "2")
    one, two = env.run(one_id), env.run(two_id)
    assert one.status == "succeeded" and two.status == "succeeded", (one.error_message, two.error_message)
    assert two.provider == "ray" and two.config["processes"] == 2 and two.step == one.step == 4
    for key in ("first_loss", "final_loss"):
        assert two.metrics[key] == pytest.approx(one.metrics[key], rel=TOLERANCE), key
    a, b = _adapter(env, one_id), _adapter(env, two_id)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=TOLERANCE, atol=1e-6), name
    events = list(two.events.read())
    assert [e["processes"] for e in events if "processes" in e] == [2]
    assert sum(1 for e in events if e.get("type") == "status" and e.get("status") == "succeeded") == 1
    log = env.provider().call(two.call_id).logs()
    assert f"trainkit: run {two_id} on 2 Ray Train workers (CPU)" in log


def _worker_pids() -> list[int]:
    """Pids of Ray Train's worker processes on this (loopback, test-only) cluster, from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"RayTrainWorker" in command:
                pids.append(int(entry.name))
    return pids


def test_a_killed_worker_fails_the_attempt_naming_its_rank_and_the_retry_resumes(
    tmp_path_factory: pytest.TempPathFactory, ray_cluster: Any
) -> None:
    datasets = tmp_path_factory.mktemp("datasets")
    mini_dataset(datasets)
    env = RayEnv(tmp_path_factory.mktemp("home"), datasets, ray_cluster.address)
    started = env.cli(
        "train", "--dataset", "mini", "--steps", "100000", "--save-every", "5", "--batch-size", "4",
        "--processes", "2", "--detach",
    )  # fmt: skip
    run_id = re.search(r"(run-\d{8}-\d{6}-[0-9a-f]+)", started.stdout).group(1)  # type: ignore[union-attr]
    wait_for(lambda: [c.step for c in env.run(run_id).checkpoints()], 300, "the first checkpoint")
    workers = wait_for(lambda: len(_worker_pids()) == 2 and _worker_pids(), 60, "two Ray Train workers")
    os.kill(max(workers), signal.SIGKILL)

    # The attempt fails naming a rank; the run stays resumable and the job's next attempt resumes it.
    failed = wait_for(
        lambda: [e for e in env.run(run_id).events.read() if e.get("retrying") and "rank" in e.get("error", "")],
        300,
        "the failed attempt",
    )
    assert "of 2 failed" in failed[0]["error"], failed
    checkpoint = max(c.step for c in env.run(run_id).checkpoints())
    wait_for(lambda: env.run(run_id).step > checkpoint, 300, "steps after the resume")
    resumed = [e for e in env.run(run_id).events.read() if e["type"] == "progress" and e["time"] > failed[0]["time"]]
    assert resumed and resumed[0]["step"] > 1, "the next attempt started from scratch, not from the checkpoint"
    assert env.run(run_id).call_attempts == 2

    # A graceful stop reaches both workers of the new attempt; the run ends stopped.
    env.cli("runs", "stop", run_id)
    run = wait_for(lambda: env.run(run_id).status == "stopped" and env.run(run_id), 300, "the stopped run")
    assert run.error_message is None
