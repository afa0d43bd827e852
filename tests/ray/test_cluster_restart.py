"""A restart of the cluster keeps the store and the volumes (files on the shared path, not Ray's KV).

A second cluster of its own (other ports) is restarted here, so the module's other tests
keep theirs. Everything talks to it from subprocesses: one process connects to one cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ray_cluster import LoopbackCluster
from ray_helpers import REPO, RayEnv, wait_for

from trainkit_core.toolkit.sqlite_kv import LocalKV

pytestmark = [pytest.mark.timeout(600)]

SPAWN = """
import json, sys
from trainkit_core import get_provider
from trainkit_core.settings import Settings
p = get_provider('ray', Settings.from_env())
op, arg = sys.argv[1], json.loads(sys.argv[2])
if op == 'spawn':
    print(json.dumps(p.spawn(arg.pop('function'), **arg).call_id))
elif op == 'wait':
    print(json.dumps(p.call(arg).wait(timeout=120)))
elif op == 'status':
    s = p.call(arg).status()
    print(json.dumps({'state': s.state, 'error': s.error}))
"""


def _python(env: RayEnv, op: str, arg: Any) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", SPAWN, op, json.dumps(arg)], env=env.env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_store_and_volumes_outlive_a_cluster_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    temp = Path(f"/tmp/tkray2-{os.getpid()}")
    temp.mkdir(exist_ok=True)
    cluster = LoopbackCluster(temp, second=True, gpus=1)
    datasets = tmp_path_factory.mktemp("datasets")
    (datasets / "demo").symlink_to(REPO / "datasets" / "demo")
    env = RayEnv(tmp_path_factory.mktemp("home"), datasets, cluster.address)
    cluster.start(dashboard=False)
    try:
        # A cluster that has a GPU (declared: Ray counts it, nothing uses it) makes the provider declare `gpu`.
        providers = {p["name"]: p for p in json.loads(env.cli("providers", "--json").stdout)}
        assert providers["ray"]["capabilities"]["gpu"] is False
        deployed = json.loads(env.cli("app", "deploy", "--json").stdout)
        assert deployed["detail"]["resources"]["GPU"] == 1 and deployed["detail"]["storage"] == str(env.storage)
        providers = {p["name"]: p for p in json.loads(env.cli("providers", "--json").stdout)}
        assert providers["ray"]["capabilities"]["gpu"] is True
        env.cli("sync", "demo")
        done_before = _python(env, "spawn", {"function": "sleep", "seconds": 0, "result": "kept"})
        assert _python(env, "wait", done_before) == "kept"
        running = _python(env, "spawn", {"function": "sleep", "seconds": 600})
        calls = LocalKV(env.storage, "_calls")
        wait_for(lambda: calls.get(f"{running}/started"), 120, "the long call to start")
        cluster.stop()
        cluster.start(dashboard=False)
        # The finished call's record, the synced dataset: all still there.
        assert _python(env, "wait", done_before) == "kept"
        listed = json.loads(env.cli("datasets", "--json").stdout)
        assert {row["name"]: row["synced"] for row in listed["datasets"]}["demo"] == "same", listed
        # The call that was running died with the cluster (Ray's GCS kept no actor): it is failed, not "running".
        status = _python(env, "status", running)
        assert status["state"] == "failed" and "died" in status["error"]
        # The restarted cluster runs new jobs against the same store.
        after = _python(env, "spawn", {"function": "sleep", "seconds": 0, "result": "after"})
        assert _python(env, "wait", after) == "after"
    finally:
        cluster.stop()
        shutil.rmtree(temp, ignore_errors=True)
