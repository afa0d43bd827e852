"""The trainkit command line in a subprocess, on a home and datasets folder of its own.

The one helper of the end-to-end suites that drive the CLI as a user would (tests/e2e,
tests/gguf): the commands run as processes, while the test reads the same home's runs
through the local provider (`store`, `run`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRAINKIT = [sys.executable, "-m", "trainkit_cli"]


def ctrl_c_as_in_a_terminal() -> None:
    """A child's `preexec_fn`: SIGINT unblocked and at its default, as a shell gives it.

    An ignored signal stays ignored through fork and exec, and Python then installs no
    KeyboardInterrupt for it. pytest may itself run with SIGINT ignored (the `ray` session
    does: its /proc status, SigIgn; so does a suite started as a shell's background job), and
    a command started from it would then never see the Ctrl-C a test sends.
    """
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def load_script(name: str) -> Any:
    """`scripts/NAME.py` as a module (the dataset generators are scripts, not part of a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Env:
    def __init__(self, home: Path, datasets: Path) -> None:
        self.home = home
        self.datasets = datasets
        self.env = {
            **os.environ,
            "TRAINKIT_HOME": str(home),
            "TRAINKIT_DATASETS_DIR": str(datasets),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "COLUMNS": "200",
        }

    def cli(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """`trainkit ARGS`, waited for; `AssertionError` with its output when `check` and it failed."""
        done = subprocess.run(
            [*TRAINKIT, *args], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"trainkit {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """`trainkit ARGS`, started and left running (its output piped)."""
        return subprocess.Popen(
            [*TRAINKIT, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
        )

    @functools.cached_property
    def provider(self) -> Any:
        """The local provider on this home, as the commands see it."""
        from trainkit_core import get_provider
        from trainkit_core.settings import ProviderSettings, Settings

        settings = Settings(provider=ProviderSettings(home=self.home))
        settings.datasets.datasets_dir = self.datasets
        return get_provider("local", settings)

    @functools.cached_property
    def store(self) -> Any:
        from trainkit_core.runs.training_run import RunStore

        return RunStore.for_provider(self.provider)

    def run(self, run_id: str) -> Any:
        return self.store.get(run_id)

    def logs(self) -> str:
        """Every job log of this home, joined."""
        return "\n".join(p.read_text(errors="replace") for p in (self.home / "logs").glob("*.log"))

    def end_warm_worker(self) -> None:
        """Stop the warm inference worker `infer` left running on this home, if any."""
        from trainkit_core.local.inference_server import read_record
        from trainkit_core.local.runner import alive

        worker = read_record(self.home)
        if worker and alive(worker.get("pid"), worker.get("pid_start")):
            try:
                os.kill(worker["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
