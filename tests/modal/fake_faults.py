"""Faults a test injects into the fake's containers (`fake_modal.worker_main` installs them).

``FAKE_MODAL_FAULTS`` is a JSON object from an attempt number (``"1"``, ``"2"``, …, or
``"*"`` for any other) to what the training part of the `train` job does in that
attempt, in place of `trainkit_core.training.job._train` (which needs torch; the
bookkeeping around it stays real, as in `tests/core/test_training_job.py`):

- ``"raise"``: raise `RuntimeError` (the job's code fails);
- ``"crash"``: SIGKILL its own container process (out of memory, a segfault) a second
  into training, as a real crash comes some way into the work: the job's background
  writers (`trainkit_core.training.background.JobWrites`) write within a quarter of a
  second, and what they held in the crash's last fraction of a second is lost by design;
- ``"succeed"``: end the run `succeeded`.

Each logs an event naming the attempt and whether it was asked to resume, so a test
can see what every attempt did.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any


def install() -> None:
    from trainkit_core.training import job

    plan = json.loads(os.environ["FAKE_MODAL_FAULTS"])
    attempt = os.environ["FAKE_MODAL_ATTEMPT"]
    action = plan.get(attempt, plan.get("*", "succeed"))

    def fake_train(ctx: Any, run: Any, scratch: Path, *, resume: bool) -> str:
        run.events.append("log", message=f"fake training: container attempt {attempt}, {action}, resume={resume}")
        if action == "raise":
            raise RuntimeError(f"fault injected in attempt {attempt}")
        if action == "crash":
            time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGKILL)
        job._end(ctx, run, "succeeded")
        return "succeeded"

    job._train = fake_train  # type: ignore[assignment]
