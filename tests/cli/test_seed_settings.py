"""The installed `trainkit` command names a `SIDECAR_*` variable it finds, with the new name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_command_reports_a_seed_variable_once_on_stderr(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "TRAINKIT_"))}
    env.update(
        TRAINKIT_HOME=str(tmp_path / "home"),
        TRAINKIT_DATASETS_DIR=str(tmp_path / "datasets"),
        SIDECAR_APP_NAME="gligabao-train",
    )
    done = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", "datasets"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    note = "SIDECAR_APP_NAME is set and ignored: trainkit reads TRAINKIT_APP_NAME; rename it"
    assert done.stderr.count(note) == 1, done.stderr
    assert note not in done.stdout
