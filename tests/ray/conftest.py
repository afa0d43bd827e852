"""One loopback Ray cluster for the whole `tests/ray` run (starting one costs seconds).

Skipped outside a network namespace holding only `lo` (see `ray_cluster`), except in the
`ray` nox session (``TRAINKIT_REQUIRE_RAY=1``), where that is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_cluster import LoopbackCluster, only_loopback

REQUIRED = os.environ.get("TRAINKIT_REQUIRE_RAY") == "1"


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
