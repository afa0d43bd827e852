"""Fixtures every test gets: its own TRAINKIT_HOME and a fresh plugin manager."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from skip_policy import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401  (hooks)

from trainkit_core.plugins.manager import reset_plugin_manager

_SWITCHES = (
    "TRAINKIT_LOAD_PLUGINS",
    "TRAINKIT_DISABLE_PLUGINS",
    "TRAINKIT_TRACE_PLUGINS",
    "TRAINKIT_DEBUG",
    "TRAINKIT_PROVIDER",
)


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
    _end_leftover_processes(home)


def _end_leftover_processes(home: Path) -> None:
    """Cancel local jobs and end a warm inference worker that a test left running.

    They are detached on purpose (they outlive their starter), so a test that fails
    before its own clean-up would otherwise leave them training in a deleted folder,
    taking CPU from the tests after it.
    """
    import signal

    from trainkit_core.local.runner import LocalRunner, alive
    from trainkit_core.toolkit.sqlite_kv import db_path

    if db_path(home).exists():
        for handle in LocalRunner(home).unfinished():
            handle.cancel(grace_s=2.0)
    try:
        from trainkit_core.local.inference_server import read_record
    except ImportError:
        return
    worker = read_record(home)
    if worker and alive(worker.get("pid"), worker.get("pid_start")):
        try:
            os.kill(worker["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture
def cli_env(trainkit_home: Path) -> dict[str, str]:
    """Environment for running `trainkit` in a subprocess against this test's home."""
    return {**os.environ, "TRAINKIT_HOME": str(trainkit_home)}
