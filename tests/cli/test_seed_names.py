"""Seed 000's names at the command line: `--train-steps`, and `SIDECAR_*` variables named with their new names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_main


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


@pytest.mark.slow
def test_train_steps_is_the_seeds_spelling_of_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "datasets" / "mini"
    folder.mkdir(parents=True)
    line = json.dumps({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "HI"}]})
    (folder / "train.jsonl").write_text((line + "\n") * 8)
    (folder / "dataset.toml").write_text('name = "mini"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(tmp_path / "datasets"))
    code, output = run_main("train", "--dataset", "mini", "--train-steps", "7", "--plan", "--json")
    assert code == 0, output
    assert json.loads(output)["steps"] == 7
    code, output = run_main("train", "--dataset", "mini", "--train-steps", "seven", "--plan")
    assert code == 2 and "'seven' is not a valid integer" in output
