"""A real tiny run, inference and eval through the CLI with `--provider ray`, on the loopback cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import RayEnv

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(900)]


def test_the_run_trains_on_the_cluster_and_its_files_land_on_the_shared_storage(
    env: RayEnv, trained: dict[str, Any]
) -> None:
    run = env.run(trained["run_id"])
    assert run.status == "succeeded", run.error_message
    assert run.provider == "ray" and run.call_id.startswith("rc-")
    assert [c.step for c in run.checkpoints()] == [15, 30]
    progress = [e for e in run.events.read() if e["type"] == "progress"]
    assert progress[-1]["step"] == 30 and progress[-1]["loss"] < progress[0]["loss"]
    # The state database and the model are files of the shared storage path.
    trained_dir = env.storage / "volumes" / "trainkit-models" / trained["model_path"]
    assert (trained_dir / "adapter_model.safetensors").is_file()
    assert (env.storage / "kv.sqlite3").is_file()
    # The job's own output, through the call's log on the shared storage.
    call_log = env.provider().call(run.call_id).logs()
    assert f"trainkit: job train call {run.call_id} attempt 1" in call_log


def test_runs_logs_and_list_read_the_store(env: RayEnv, trained: dict[str, Any]) -> None:
    events = [json.loads(line) for line in env.cli("runs", "logs", trained["run_id"], "--json").stdout.splitlines()]
    assert events[-1]["type"] == "status" and events[-1]["status"] == "succeeded"
    listed = json.loads(env.cli("runs", "list", "--json").stdout)
    assert trained["run_id"] in json.dumps(listed)


def test_warm_inference_on_the_cluster_answers_as_the_infer_job(env: RayEnv, trained: dict[str, Any]) -> None:
    prompt = "Opposites: hot early loud"
    ask = ("infer", "--model-path", trained["model_path"], "--prompt", prompt, "--max-new-tokens", "12", "--json")
    first = json.loads(env.cli(*ask).stdout)
    second = json.loads(env.cli(*ask).stdout)
    cold = json.loads(env.cli(*ask, "--no-warm").stdout)
    assert first["text"] == second["text"] == cold["text"] and first["text"].strip()
    # One load for both warm answers: the actor kept the model between the two processes.
    status = env.provider().inference_server().status()
    assert status is not None and status["loads"] == 1 and status["requests"] == 2


def test_eval_runs_on_the_cluster(env: RayEnv, trained: dict[str, Any]) -> None:
    ran = env.cli(
        "eval", "run", "--model-path", trained["model_path"], "--max-examples", "3", "--max-new-tokens", "12", "--json"
    )
    report = json.loads(ran.stdout)
    assert report["tuned"]["examples"] == 3 and report["base"]["examples"] == 3


def test_the_store_is_read_without_connecting_to_the_cluster(
    env: RayEnv, trained: dict[str, Any], tmp_path: Path
) -> None:
    """`runs list` and `--help` never call `ray.init`: with no cluster at the address they still answer."""
    nowhere = RayEnv(env.home, Path(env.env["TRAINKIT_DATASETS_DIR"]), "127.0.0.1:1")
    listed = nowhere.cli("runs", "list", "--json", timeout=60)
    assert trained["run_id"] in listed.stdout
    assert nowhere.cli("--help", timeout=60).returncode == 0
    shown = nowhere.cli("runs", "show", trained["run_id"], "--json", timeout=60)
    assert json.loads(shown.stdout)["status"] == "succeeded"
