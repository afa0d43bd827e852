"""A SIGINT to a real training worker of the local provider.

A SIGINT is how a provider preempts a job: the job records `preempted` (not terminal:
a restart resumes it). The local provider restarts nothing, so the worker's call ends
with the KeyboardInterrupt; the reconciler then ends the run once, saying it was
interrupted and how to go on, never a bare "failed: KeyboardInterrupt" over the
preemption's own words. The same for every method; DPO is the one the issue saw. The SFT
run is started from a process that ignores SIGINT (as `nohup` or a shell's background job
would start it): its worker still takes the SIGINT, since the worker resets it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import methods_demo as demo
import pytest

pytestmark = [pytest.mark.ml, pytest.mark.timeout(900)]


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from trainkit_core import get_provider
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    demo.write_datasets(tmp_path / "datasets")
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    settings = Settings(
        provider=ProviderSettings(home=tmp_path / "home"), datasets=DatasetSettings(datasets_dir=tmp_path / "datasets")
    )
    return get_provider("local", settings)


@pytest.mark.parametrize(
    "config",
    [
        {"dataset": "style-pref", "method": "dpo", "model_size": "tiny", "steps": 2000},
        {"dataset": "style-prompts", "method": "grpo", "model_size": "tiny", "steps": 2000, "rewards": ["exact_match"]},
        {"dataset": "style-sft", "model_size": "tiny", "steps": 2000},
    ],
    ids=["dpo", "grpo", "sft"],
)
def test_sigint_to_a_training_worker_ends_the_run_once_and_consistently(local: Any, config: dict[str, Any]) -> None:
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.training.submit import start_run

    ignored = config.get("method") is None  # the sft run: started with SIGINT ignored, as under nohup
    before = signal.signal(signal.SIGINT, signal.SIG_IGN) if ignored else None
    try:
        run = start_run(local, config)
    finally:
        if ignored:
            signal.signal(signal.SIGINT, before)
    call = local.call(run.call_id)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # training, a step done
        run.reload()
        if run.ended() or (run.status == "running" and run.step >= 1):
            break
        time.sleep(0.2)
    assert run.status == "running" and run.step >= 1, (run.status, run.error_message)
    os.kill(call.record()["pid"], signal.SIGINT)
    while call.status().state in ("pending", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert call.status().state == "failed"  # the worker's call reports the KeyboardInterrupt

    ended = RunStore.for_provider(local).get(run.id)
    assert ended.done() and ended.status == "failed"
    reason = ended.error_message or ""
    assert "interrupted (SIGINT)" in reason and "trainkit runs resume" in reason, reason
    statuses = [(e["status"], e.get("error") or e.get("reason")) for e in ended.events.read() if e["type"] == "status"]
    assert [s for s, _ in statuses][-2:] == ["preempted", "failed"]
    assert [s for s, _ in statuses].count("failed") == 1
    assert not any("KeyboardInterrupt" in str(text) for _, text in statuses), statuses
    # Read again: nothing overwrites it.
    again = RunStore.for_provider(local).get(run.id)
    assert again.done() and (again.status, again.error_message) == ("failed", reason)
