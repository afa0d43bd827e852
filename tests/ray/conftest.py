"""One loopback Ray cluster for the whole `tests/ray` run (starting one costs seconds), and
one tiny run trained on it through the CLI, which the run, inference and web API tests share.

Skipped outside a network namespace holding only `lo` (see `ray_cluster`), except in the
`ray` nox session (``TRAINKIT_REQUIRE_RAY=1``), where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_cluster import LoopbackCluster, only_loopback
from ray_helpers import REPO, RayEnv

REQUIRED = os.environ.get("TRAINKIT_REQUIRE_RAY") == "1"
# Seen with Ray 2.60: once ~/.ray/auth_token exists (a plain local `ray.init()` writes it),
# `ray start` turns token authentication on and trainkit's clients were refused
# (InvalidAuthToken). The loopback-only test cluster and its clients (subprocesses inherit
# this) run without tokens, whatever the machine's home holds.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if REQUIRED:
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        reason = "ray is not installed (the `ray` nox session installs it)"
    else:
        reason = "" if only_loopback() else "needs a network namespace holding only lo (the `ray` nox session)"
    if reason:
        for item in items:
            if "tests/ray/" in str(item.fspath).replace(os.sep, "/"):
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LoopbackCluster]:
    temp = Path(f"/tmp/tkray-{os.getpid()}")  # short: Ray's socket paths must fit 107 bytes
    temp.mkdir(exist_ok=True)
    cluster = LoopbackCluster(temp)
    cluster.start()
    yield cluster
    cluster.stop()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(autouse=True)
def ray_address(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test of this folder talks to the loopback cluster (started on first use)."""
    cluster = request.getfixturevalue("ray_cluster")
    monkeypatch.setenv("TRAINKIT_RAY_ADDRESS", cluster.address)


@pytest.fixture(scope="session")
def env(tmp_path_factory: pytest.TempPathFactory, ray_cluster: LoopbackCluster) -> RayEnv:
    """A home and shared storage with the demo dataset, for the tests that share one trained run."""
    datasets = tmp_path_factory.mktemp("datasets")
    (datasets / "demo").symlink_to(REPO / "datasets" / "demo")
    return RayEnv(tmp_path_factory.mktemp("home"), datasets, ray_cluster.address)


@pytest.fixture(scope="session")
def trained(env: RayEnv) -> dict[str, Any]:
    """A tiny run trained on the cluster through the CLI: its model path, run id and output."""
    done = env.cli(
        "--provider", "ray", "train", "--dataset", "demo", "--model-size", "tiny", "--steps", "30", "--save-every", "15"
    )
    found = re.search(r"model: (trained/(run-\S+))", done.stdout)
    assert found, done.stdout + done.stderr
    return {"model_path": found.group(1), "run_id": found.group(2), "out": done.stdout}
