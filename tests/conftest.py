"""Fixtures every test gets: its own TRAINKIT_HOME and a fresh plugin manager."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from skip_policy import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401  (hooks)

from trainkit_core.plugins.manager import reset_plugin_manager

#: The ml session's longest files (worker-seconds, measured 2026-12-06), started first: with
#: `--dist loadfile` each file goes whole to the next free worker in collection order, so a
#: long file collected last leaves the other worker idle at the end. Longest first is the
#: classic rule for that. Only the order changes; a file not listed keeps its place after these.
LONGEST_FIRST = (
    "tests/docs/test_images_tutorial.py",
    "tests/core/test_distributed_ml.py",
    "tests/core/test_methods_ml.py",
    "tests/core/test_twins.py",
    "tests/e2e/test_audio_train.py",
    "tests/gguf/test_gguf_twins.py",
    "tests/docs/test_tutorials.py",
    "tests/e2e/test_twins_methods.py",
    "tests/gguf/test_gguf_export.py",
    "tests/e2e/test_vision_train.py",
    "tests/api/test_fine_tuning_ml.py",
    "tests/modal/test_gpus_modal.py",
)

#: The tiny base (its copying lesson costs a minute or two of CPU) is built once per machine
#: and copied into each test's home (`trainkit_core.models.tiny_model.ensure_tiny_base`), for
#: every xdist worker, every nox session and the jobs they start. Set here, at import, so that
#: processes started by session fixtures (a Ray cluster) inherit it. The folder is keyed by the
#: base's build version; a change to the lesson bumps it.
os.environ.setdefault(
    "TRAINKIT_TINY_BASE_CACHE", str(Path(tempfile.gettempdir()) / f"trainkit-tests-tiny-base-{os.getuid()}")
)

_SWITCHES = (
    "TRAINKIT_LOAD_PLUGINS",
    "TRAINKIT_DISABLE_PLUGINS",
    "TRAINKIT_TRACE_PLUGINS",
    "TRAINKIT_DEBUG",
    "TRAINKIT_PROVIDER",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Collect the `LONGEST_FIRST` files first, each file's tests kept together and in order."""
    root = Path(config.rootpath)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def file_rank(item: pytest.Item) -> int:
        return rank.get(item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else "", len(rank))

    items.sort(key=file_rank)  # stable: the files not listed keep their order


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
