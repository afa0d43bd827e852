"""The trainkit command line in a subprocess, on a home and datasets folder of its own.

Shared by the end-to-end suites that drive the CLI as a user would (tests/e2e, tests/gguf).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class Env:
    def __init__(self, home: Path, datasets: Path) -> None:
        self.home = home
        self.env = {
            **os.environ,
            "TRAINKIT_HOME": str(home),
            "TRAINKIT_DATASETS_DIR": str(datasets),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "COLUMNS": "200",
        }

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "trainkit_cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=REPO,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"trainkit {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done
