"""A fresh trainkit home per GGUF test module, with the demo dataset."""

from __future__ import annotations

import pytest
from cli_env import REPO, Env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    datasets = tmp_path_factory.mktemp("datasets")
    (datasets / "demo").symlink_to(REPO / "datasets" / "demo")
    return Env(tmp_path_factory.mktemp("home"), datasets)
