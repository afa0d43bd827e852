"""A client that does not mount the shared storage (a laptop through Ray Client) works through the cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from ray_helpers import REPO, RayEnv

pytestmark = [pytest.mark.timeout(600)]


def test_a_dataset_synced_from_a_client_without_the_shared_path_lands_on_it(
    tmp_path_factory: pytest.TempPathFactory, ray_cluster: Any
) -> None:
    ray_cluster.wait_for_port(ray_cluster.client_port)
    datasets = tmp_path_factory.mktemp("datasets")
    (datasets / "demo").symlink_to(REPO / "datasets" / "demo")
    cluster_side = tmp_path_factory.mktemp("cluster-side")
    # The laptop: its home holds nothing of the storage path, which only the cluster's nodes see.
    laptop = RayEnv(
        tmp_path_factory.mktemp("laptop"),
        datasets,
        ray_cluster.client_address,
        TRAINKIT_RAY_STORAGE=str(cluster_side / "shared"),
        TRAINKIT_RAY_STORAGE_ACCESS="cluster",
    )
    laptop.storage = cluster_side / "shared"
    synced = laptop.cli("sync", "demo", "--json", timeout=300, check=False)
    assert synced.returncode == 0, synced.stderr + ray_cluster.logs("ray_client_server*")
    assert json.loads(synced.stdout)["files_sent"] == ["dataset.toml", "eval.jsonl", "train.jsonl"]
    # What a machine mounting the storage path sees: the dataset, synced.
    mounted = RayEnv(laptop.home, datasets, ray_cluster.address, TRAINKIT_RAY_STORAGE=str(cluster_side / "shared"))
    seen = {row["name"]: row for row in json.loads(mounted.cli("datasets", "--json").stdout)["datasets"]}
    assert seen["demo"]["synced"] == "same", seen
    # The laptop lists what the cluster holds, through the storage actor.
    listed = json.loads(laptop.cli("datasets", "--json", timeout=300).stdout)
    assert {row["name"]: row["synced"] for row in listed["datasets"]}["demo"] == "same", listed
    # And a job started from the laptop runs on the cluster, its result read back through it.
    code = (
        "from trainkit_core import get_provider; from trainkit_core.settings import Settings;"
        "p = get_provider('ray', Settings.from_env()); h = p.spawn('sleep', seconds=0, result='from the cluster', say='hi');"
        "print(h.wait(timeout=120)); print('logs:', 'hi' in h.logs())"
    )
    done = subprocess.run([sys.executable, "-c", code], env=laptop.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "from the cluster" in done.stdout
    assert "logs: True" in done.stdout
    assert not (laptop.home / "ray").exists(), "the laptop wrote the storage to its own disk"
