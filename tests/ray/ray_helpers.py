"""The CLI against the loopback cluster: one home (and shared storage) per test module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainkit_core import get_provider
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import Settings

REPO = Path(__file__).resolve().parents[2]
TRAINKIT = [sys.executable, "-m", "trainkit_cli"]


def mini_dataset(folder: Path) -> Path:
    """Eight uppercase examples without an eval split: a run of many steps, for the kill and stop tests."""
    mini = folder / "mini"
    mini.mkdir()
    (mini / "dataset.toml").write_text('name = "mini"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    words = ["red", "blue", "green", "cat", "dog", "sun", "moon", "tree"]
    lines = [
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"Uppercase: {a} {b}"},
                    {"role": "assistant", "content": f"{a} {b}".upper()},
                ]
            }
        )
        for a, b in zip(words, reversed(words), strict=True)
    ]
    (mini / "train.jsonl").write_text("\n".join(lines) + "\n")
    return mini


class RayEnv:
    """`trainkit --provider ray` in subprocesses, and the same store seen from here."""

    def __init__(self, home: Path, datasets: Path, address: str, **extra: str) -> None:
        self.home = home
        self.storage = home / "shared"
        self.env = {
            **os.environ,
            "TRAINKIT_HOME": str(home),
            "TRAINKIT_PROVIDER": "ray",
            "TRAINKIT_RAY_ADDRESS": address,
            "TRAINKIT_RAY_STORAGE": str(self.storage),
            "TRAINKIT_DATASETS_DIR": str(datasets),
            "TRAINKIT_INFER_IDLE_TIMEOUT_S": "120",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "COLUMNS": "200",
            **extra,
        }

    def settings(self) -> Settings:
        saved = dict(os.environ)
        os.environ.update(self.env)
        try:
            from trainkit_ray.settings import RaySettings

            return Settings.from_env().with_plugin_settings(RaySettings)  # read now, not when first used
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def provider(self) -> Any:
        return get_provider("ray", self.settings())

    def store(self) -> RunStore:
        return RunStore.for_provider(self.provider())

    def run(self, run_id: str) -> TrainingRun:
        return self.store().get(run_id)

    def cli(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*TRAINKIT, *args], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"trainkit {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
