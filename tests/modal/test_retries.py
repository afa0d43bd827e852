"""Retries of a training job on Modal, through the fake: attempts raise, containers crash.

The fake runs each attempt of a call in a fresh container process and retries as
Modal does: an attempt that raises while the function's `Retries` allow, and a
container that dies (out of memory, a segfault) again and again, beyond them. The
training part of the job is replaced in the containers (`fake_faults.py`: it raises,
crashes or succeeds as the test plans); the job's bookkeeping, the run record, the
events and the call records are the real ones.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from trainkit_core.errors import JobError, ProviderError
from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.runs.training_run import TrainingRun
from trainkit_core.settings import Settings
from trainkit_core.training.submit import start_run
from trainkit_modal.plugin import ModalPlugin

REPO = Path(__file__).resolve().parents[2]


def provider_on(sdk: object) -> Provider:
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: sdk), name="modal", module="trainkit_modal.plugin")
    return get_provider("modal", Settings.from_env(), pm=pm)


@pytest.fixture
def deployed(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Provider:
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(REPO / "datasets"))
    monkeypatch.setenv("TRAINKIT_TRAIN_MAX_ATTEMPTS", "2")
    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    return provider


def _start(provider: Provider, monkeypatch: pytest.MonkeyPatch, plan: dict[str, str]) -> TrainingRun:
    monkeypatch.setenv("FAKE_MODAL_FAULTS", json.dumps(plan))
    return start_run(provider, {"dataset": "demo", "model_size": "tiny", "steps": 5})


def _attempts(fake_modal: ModuleType, call_id: str) -> list[str]:
    record = json.loads((fake_modal._root() / "calls" / f"{call_id}.json").read_text())
    return [a["end"] for a in record["attempts"]]


def _events(run: TrainingRun, kind: str) -> list[dict[str, Any]]:
    return [e for e in run.events.read() if e["type"] == kind]


@pytest.mark.slow
def test_a_failed_attempt_leaves_the_run_resumable_and_the_next_resumes(
    deployed: Provider, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _start(deployed, monkeypatch, {"1": "raise", "2": "succeed"})
    assert run.call.wait(timeout=120)["status"] == "succeeded"  # the call reports the run's outcome
    run.reload()
    assert run.status == "succeeded" and run.error_message is None
    assert (run.call_attempts, run.max_attempts, run.attempt) == (2, 2, 2)
    assert _attempts(fake_modal, run.call_id) == ["failed", "succeeded"]
    # Attempt 1 left the run pending (not ended) with its error; attempt 2 resumed it.
    statuses = [(e["status"], e.get("error")) for e in _events(run, "status")]
    assert statuses == [
        ("pending", None),
        ("running", None),
        ("pending", "RuntimeError: fault injected in attempt 1"),
        ("running", None),
        ("succeeded", None),
    ]
    trained = [e["message"] for e in _events(run, "log") if e["message"].startswith("fake training")]
    assert trained == [
        "fake training: container attempt 1, raise, resume=False",
        "fake training: container attempt 2, succeed, resume=True",
    ]
    # Each attempt reloaded only the volumes training reads (never the hf-cache), and committed all.
    ops = [line.split() for line in (fake_modal._root() / "volume-ops.log").read_text().splitlines()]
    mine = [(op, name) for call, op, name in ops if call == run.call_id]
    assert sorted(name for op, name in mine if op == "reload") == sorted(["trainkit-data", "trainkit-models"] * 2)


@pytest.mark.slow
def test_the_last_attempt_that_raises_fails_the_run(
    deployed: Provider, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _start(deployed, monkeypatch, {"*": "raise"})
    with pytest.raises(JobError, match="fault injected in attempt 2"):
        run.call.wait(timeout=120)
    run.reload()
    assert run.status == "failed" and run.error_message == "RuntimeError: fault injected in attempt 2"
    assert (run.call_attempts, run.max_attempts) == (2, 2)
    assert _attempts(fake_modal, run.call_id) == ["failed", "failed"]  # Retries(1): two attempts
    assert [e["status"] for e in _events(run, "status")][-2:] == ["running", "failed"]


@pytest.mark.slow
def test_a_crash_loop_stops_at_the_cap(
    deployed: Provider, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Modal restarts a crashed container without end; the job gives up once the attempts are spent."""
    run = _start(deployed, monkeypatch, {"*": "crash"})
    with pytest.raises(JobError, match="gave up after 2 attempt"):
        run.call.wait(timeout=180)
    run.reload()
    assert run.status == "failed" and "gave up after 2 attempt(s)" in (run.error_message or "")
    ends = _attempts(fake_modal, run.call_id)
    # Two crashes, then the attempt over the cap fails the run; Modal's one retry of that
    # raise finds the run failed and fails at once, without training.
    assert ends == ["crashed", "crashed", "failed", "failed"]
    assert len(ends) < fake_modal.CRASH_LOOP_SAFETY
    trained = [e["message"] for e in _events(run, "log") if e["message"].startswith("fake training")]
    assert len(trained) == 2


@pytest.mark.slow
def test_runs_know_their_app(deployed: Provider, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    status = deployed.deployment().status()
    run = _start(deployed, monkeypatch, {"*": "succeed"})
    app_id = status.detail["app_id"]
    assert run.provider_app_id == app_id and app_id.startswith("ap-")
    assert run.provider_app_url == f"https://modal.com/id/{app_id}"
    assert run.deployment_id == f"{app_id}/v{status.detail['version']}"
    run.wait(timeout=120)
    stored = run.reload()
    assert (stored.provider_app_id, stored.deployment_id) == (run.provider_app_id, run.deployment_id)
    assert deployed.call(run.call_id).app["provider_app_id"] == app_id  # found again from any process


# --------------------------------------------------------------------------- generation


def _generation_attempts(fake_modal: ModuleType) -> list[list[str]]:
    """The attempts' ends of every call of the inference classes, in call order."""
    records = [json.loads(p.read_text()) for p in (fake_modal._root() / "calls").glob("fc-*.json")]
    records = [r for r in records if str(r.get("name", "")).startswith("Inference_")]
    return [[a["end"] for a in r["attempts"]] for r in records]


@pytest.mark.slow
def test_a_generation_that_raises_is_not_run_again(
    deployed: Provider, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's bad request (or a timeout) raises in the container; paying for it twice buys nothing."""
    from trainkit_core.errors import NotFoundError

    monkeypatch.setenv("FAKE_MODAL_INFER_FAULTS", json.dumps({"*": "raise"}))
    server = deployed.inference_server()
    assert server is not None
    with pytest.raises(NotFoundError, match="fault of attempt 1"):
        server.generate({"model_path": "trained/run-20261130-120000-abcdef", "prompt": "hi", "model_size": "tiny"})
    assert _generation_attempts(fake_modal) == [["failed"]]


@pytest.mark.slow
def test_a_generation_whose_container_crashed_runs_again_at_once(
    deployed: Provider, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODAL_INFER_FAULTS", json.dumps({"1": "crash", "*": "answer"}))
    server = deployed.inference_server()
    assert server is not None
    answer = server.generate({"model_path": "trained/run-20261130-120000-abcdef", "prompt": "hi", "model_size": "tiny"})
    assert answer == {"text": "answered in attempt 2"}
    assert _generation_attempts(fake_modal) == [["crashed", "succeeded"]]


# --------------------------------------------------------------------------- Modal's service failing


def _only_run(provider: Provider, timeout: float = 120.0) -> TrainingRun:
    """The one run of the store once its job has started (the entry point started it in another thread)."""
    from trainkit_core.runs.training_run import RunStore

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs, _ = RunStore.for_provider(provider).page(limit=5, reconcile=False)
        if runs and runs[0].status == "running":
            return runs[0]
        time.sleep(0.1)
    raise AssertionError("no run started")


@pytest.mark.slow
def test_a_service_error_while_polling_leaves_the_run_running_and_the_entry_point_waiting(
    deployed: Provider, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`modal run --action train` waits through Modal's passing failures: its app (and the run's
    container) stops when it returns. Before that fix the first `ServiceError` failed the run."""
    import fake_faults

    from trainkit_core.runs.reconcile import reconcile_run
    from trainkit_modal.actions import run_action

    monkeypatch.setenv("FAKE_MODAL_FAULTS", json.dumps({"*": "hold"}))
    outcome: dict[str, Any] = {}

    def entry_point() -> None:
        try:
            outcome["run"] = run_action(
                deployed, "train", dataset="demo", model_size="tiny", train_steps=5, poll_s=0.05
            )
        except BaseException as exc:
            outcome["error"] = exc

    waiter = threading.Thread(target=entry_point, daemon=True)
    waiter.start()
    run = _only_run(deployed)
    # Modal's service fails the next polls of the call: errors, a rate limit.
    fake_faults.plan_client_faults("FunctionCall.get", ["ServiceError", "ResourceExhaustedError", "ServiceError"])
    deadline = time.monotonic() + 60
    while fake_faults.client_faults_left("FunctionCall.get") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake_faults.client_faults_left("FunctionCall.get") == 0  # the entry point's polls met them all
    run.reload()
    assert run.status == "running" and run.error_message is None
    assert waiter.is_alive() and not outcome  # still waiting for the run
    # A reader's reconcile meeting one does not decide either; the handle says what happened.
    # (Planned for this thread: the entry point's thread polls the same call meanwhile.)
    fake_faults.plan_client_faults("FunctionCall.get", ["ServiceError"], this_thread=True)
    with pytest.raises(ProviderError, match="ServiceError"):
        run.call.status()
    fake_faults.plan_client_faults("FunctionCall.get", ["ResourceExhaustedError"], this_thread=True)
    assert reconcile_run(run) is False and run.status == "running"
    assert fake_faults.client_faults_left("FunctionCall.get", this_thread=True) == 0  # each met by this thread
    # The handle's own wait goes on through them too.
    fake_faults.plan_client_faults("FunctionCall.get", ["ServiceError", "ResourceExhaustedError"], this_thread=True)
    (fake_modal._root() / f"release-{run.id}").touch()
    assert run.call.wait(timeout=120)["status"] == "succeeded"
    waiter.join(timeout=120)
    assert not waiter.is_alive() and "error" not in outcome, outcome.get("error")
    assert outcome["run"]["status"] == "succeeded" and outcome["run"]["id"] == run.id


@pytest.mark.slow
def test_the_entry_point_waits_through_a_rate_limit_on_the_runs_record_and_a_failed_spawn_says_why(
    deployed: Provider, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variants: Modal refusing reads of the run's record (a Dict) while `modal run --action train`
    waits, and refusing the spawn itself (a clear provider error, the run left failed with it)."""
    import os

    import fake_faults

    from trainkit_core.runs.training_run import RunStore
    from trainkit_modal.actions import run_action
    from trainkit_modal.errors import ModalUnavailable

    monkeypatch.setenv("FAKE_MODAL_FAULTS", json.dumps({"*": "hold"}))
    outcome: dict[str, Any] = {}

    def entry_point() -> None:
        try:
            outcome["run"] = run_action(
                deployed, "train", dataset="demo", model_size="tiny", train_steps=5, poll_s=0.05
            )
        except BaseException as exc:
            outcome["error"] = exc

    waiter = threading.Thread(target=entry_point, daemon=True)
    waiter.start()
    run = _only_run(deployed)
    runs_dict = f"Dict.get:{RunStore.for_provider(deployed).records.name}"  # type: ignore[attr-defined]
    faults = ["ResourceExhaustedError", "ServiceError", "ResourceExhaustedError"]
    fake_faults.plan_client_faults(runs_dict, faults, pid=os.getpid())  # this process only, not the container
    deadline = time.monotonic() + 60
    while fake_faults.client_faults_left(runs_dict, pid=os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake_faults.client_faults_left(runs_dict, pid=os.getpid()) == 0
    assert waiter.is_alive() and not outcome
    (fake_modal._root() / f"release-{run.id}").touch()
    waiter.join(timeout=120)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["run"]["status"] == "succeeded"

    # The spawn refused by a rate limit: the submit says so, naming Modal's error.
    fake_faults.plan_client_faults("FunctionCall.get", [])  # nothing planned for polls
    monkeypatch.setattr(
        fake_modal.Function,
        "from_name",
        staticmethod(lambda *a, **k: (_ for _ in ()).throw(fake_modal.exception.ResourceExhaustedError("rate limit"))),
    )
    with pytest.raises(ModalUnavailable, match="ResourceExhaustedError: rate limit"):
        start_run(deployed, {"dataset": "demo", "model_size": "tiny", "steps": 5})
