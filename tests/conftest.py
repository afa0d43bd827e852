"""Fixtures every test gets: its own TRAINKIT_HOME and a fresh plugin manager."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainkit_core.plugins import reset_plugin_manager

_SWITCHES = ("TRAINKIT_LOAD_PLUGINS", "TRAINKIT_DISABLE_PLUGINS", "TRAINKIT_TRACE_PLUGINS", "TRAINKIT_PROVIDER")


@pytest.fixture(autouse=True)
def trainkit_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private trainkit home (volumes, SQLite, logs) for each test."""
    home = tmp_path_factory.mktemp("trainkit-home")
    monkeypatch.setenv("TRAINKIT_HOME", str(home))
    for name in _SWITCHES:
        monkeypatch.delenv(name, raising=False)
    # No test may reach a model hub.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    reset_plugin_manager()
    yield home
    reset_plugin_manager()


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture
def cli_env(trainkit_home: Path) -> dict[str, str]:
    """Environment for running `trainkit` in a subprocess against this test's home."""
    return {**os.environ, "TRAINKIT_HOME": str(trainkit_home)}
