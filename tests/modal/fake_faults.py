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

- ``"hold"``: wait until the test creates ``$FAKE_MODAL_ROOT/release-<run id>``, then
  succeed: a run that stays `running` for as long as a test needs.

Each logs an event naming the attempt and whether it was asked to resume, so a test
can see what every attempt did.

``FAKE_MODAL_INFER_FAULTS`` does the same for a generation on the warm inference class
(`WarmInference.generate`, which needs a model): ``"raise"`` (a user error: the
request names no model that exists), ``"crash"``, ``"answer"`` (a fixed answer naming
the attempt), ``"slow"`` (the same answer after 3 s: a cold container's model load), or
``"slow-raise"`` (the user error of ``"raise"`` after those 3 s).

Client faults (`plan_client_faults`) are what Modal's service answers a client call
with instead of doing it: the next calls of a fake SDK method (``"FunctionCall.get"``,
``"Dict.get:<dict name>"``) raise the named exceptions of `fake_modal.exception`
(modal's names, e.g. ``ServiceError``, ``ResourceExhaustedError``), one per call, in
any process or in the one named.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any


def install() -> None:
    if os.environ.get("FAKE_MODAL_INFER_FAULTS"):
        _install_infer(json.loads(os.environ["FAKE_MODAL_INFER_FAULTS"]))
    if not os.environ.get("FAKE_MODAL_FAULTS"):
        return
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
        if action == "hold":
            release = Path(os.environ["FAKE_MODAL_ROOT"]) / f"release-{run.id}"
            while not release.exists():
                time.sleep(0.05)
        job._end(ctx, run, "succeeded")
        return "succeeded"

    job._train = fake_train  # type: ignore[assignment]


def _install_infer(plan: dict[str, str]) -> None:
    from trainkit_core.errors import NotFoundError
    from trainkit_modal.container import WarmInference

    attempt = os.environ["FAKE_MODAL_ATTEMPT"]
    action = plan.get(attempt, plan.get("*", "answer"))

    def fake_generate(self: Any, request: dict[str, Any]) -> dict[str, Any]:
        if action in ("slow", "slow-raise"):
            time.sleep(3.0)
        if action in ("raise", "slow-raise"):
            raise NotFoundError(f"no trained model {request.get('model_path')!r} (fault of attempt {attempt})")
        if action == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"text": f"answered in attempt {attempt}"}

    WarmInference.generate = fake_generate  # type: ignore[method-assign]


def _client_faults_path() -> Path:
    """Read by `fake_modal._client_fault`, which raises them (in any process, the container simulation's too)."""
    return Path(os.environ["FAKE_MODAL_ROOT"]) / "client-faults.json"


def plan_client_faults(method: str, names: list[str], *, pid: int | None = None, this_thread: bool = False) -> None:
    """Make the next ``len(names)`` calls of `method` raise modal's exceptions of those names,
    in process `pid` only when given (so a container's own calls are left alone), or in the
    calling thread only (so another thread of the test's process polling meanwhile does not
    take them)."""
    import fake_modal

    for name in names:
        if not isinstance(getattr(fake_modal.exception, name, None), type):
            raise ValueError(f"modal.exception has no {name}")
    path = _client_faults_path()
    # Under the fake's lock and replaced whole: a client call in another thread reads the plan
    # meanwhile, and a file truncated for rewriting reads as "" (a JSONDecodeError, not a fault).
    with fake_modal._db_lock:
        plan = json.loads(path.read_text()) if path.exists() else {}
        plan.setdefault(_key(method, pid, this_thread), []).extend(names)
        fake_modal._write_json(path, plan)


def _key(method: str, pid: int | None, this_thread: bool) -> str:
    if this_thread:
        import os
        import threading

        return f"{method}#{os.getpid()}.{threading.get_ident()}"
    return method if pid is None else f"{method}@{pid}"


def client_faults_left(method: str, *, pid: int | None = None, this_thread: bool = False) -> int:
    import fake_modal

    path = _client_faults_path()
    key = _key(method, pid, this_thread)
    with fake_modal._db_lock:
        return len(json.loads(path.read_text()).get(key, [])) if path.exists() else 0
