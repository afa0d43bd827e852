"""A budget that runs out mid-way stops the run gracefully: adapter saved, `stopped`, the reason kept.

One real training of the tiny model, in this process (the `train` job as the local
provider's worker calls it), so that a test clock can stand for the wall clock: it
ticks one second each time it is read, and a test price table prices the CPU at $1
a second, so the $30 budget runs out after a fixed number of reads, well before the
200 steps asked for. The same run shows the seed's `substep_times` filled.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_core import get_provider
from trainkit_core.datasets.sync import sync_dataset
from trainkit_core.ids import new_run_id
from trainkit_core.local.plugin import job_context
from trainkit_core.runs.pricing import price_for_run
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import Settings
from trainkit_core.training import budget, job
from trainkit_core.training.budget import check_budget
from trainkit_core.training.config import TrainConfig

pytestmark = [pytest.mark.ml, pytest.mark.timeout(900)]


class TickingClock:
    """A test clock that moves one second each time it is read."""

    def __init__(self, start: float) -> None:
        self.now = start

    def time(self) -> float:
        self.now += 1.0
        return self.now


def _dataset(root: Path) -> None:
    folder = root / "mini"
    folder.mkdir(parents=True)
    (folder / "dataset.toml").write_text(
        'name = "mini"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )
    words = ["red", "blue", "green", "cat", "dog", "sun", "moon", "tree"]

    def line(a: str, b: str) -> str:
        messages = [
            {"role": "user", "content": f"Uppercase: {a} {b}"},
            {"role": "assistant", "content": f"{a} {b}".upper()},
        ]
        return json.dumps({"messages": messages}) + "\n"

    (folder / "train.jsonl").write_text("".join(line(a, b) for a in words for b in words[:2]))
    (folder / "eval.jsonl").write_text("".join(line(a, "sky") for a in words[:3]))


def _local_with_mini(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, Any]:
    """The local provider, offline, with the `mini` dataset synced."""
    _dataset(tmp_path / "datasets")
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(tmp_path / "datasets"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    settings = Settings.from_env()
    provider = get_provider("local", settings)
    sync_dataset(provider, "mini", settings)
    return settings, provider


def test_a_run_whose_budget_runs_out_mid_way_ends_stopped_with_its_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('date = "2026-12-01"\n[local.gpus]\ncpu = 3600.0\n')  # $1 a second
    monkeypatch.setenv("TRAINKIT_PRICES_FILE", str(prices))
    settings, provider = _local_with_mini(tmp_path, monkeypatch)

    # The record `start_run` writes, without spawning: the job runs here, on the test clock.
    config = TrainConfig.parse(dataset="mini", steps=200, save_every=1000, batch_size=4).resolve()
    price = price_for_run(provider, config.gpu or "")
    run = TrainingRun(
        id=new_run_id(),
        provider="local",
        config=config.model_dump(mode="json"),
        dataset_id="mini",
        created_at=time.time(),
        price=price,
        budget=check_budget({"max_cost_usd": 30.0}, price),
    ).attach(RunStore.for_provider(provider))
    run.save()
    clock = TickingClock(time.time())
    monkeypatch.setattr(job, "time", clock)
    monkeypatch.setattr(budget, "clock", clock.time)

    result = job.train(job_context(settings, "lc-budget"), run.id)

    stored = run.reload()
    assert result["status"] == stored.status == "stopped"
    assert stored.stop_reason == "budget reached: max cost $30"
    assert 0 < stored.step < 200  # mid-way
    assert stored.completed_at is None and stored.ended_at is not None
    assert stored.cost_usd is not None and stored.cost_usd >= 30.0
    assert stored.cost_usd == pytest.approx(stored.duration_seconds or 0.0)  # $1 per second of job time
    models = Path(provider.volume("models").root)  # type: ignore[attr-defined]
    final = models / "trained" / run.id
    assert (final / "adapter_model.safetensors").is_file()
    card = json.loads((final / "trained_model.json").read_text())
    assert card["accounting"]["price"]["usd_per_hour"] == 3600.0 and card["accounting"]["cost_usd"] >= 30.0
    assert [c.step for c in stored.checkpoints()] == [stored.step]  # resumable from where it stopped
    messages = [e.get("message", "") for e in stored.events.read() if e["type"] == "log"]
    assert any(m.startswith("budget reached: max cost $30: stopping after step") for m in messages)

    # The seed's substep_times: model load, tokenisation, each checkpoint save, the gate, the eval.
    sub = stored.substep_times
    assert sub["loading_model"]["load_model"]["ok"] is True
    assert sub["loading_dataset"]["tokenize"]["examples"] == 16 and sub["loading_dataset"]["tokenize"]["tokens"] > 0
    assert [k for k in sub["training"]] == [f"checkpoint-{stored.step:08d}"]
    assert sub["saving"]["adapter_gate"]["ok"] is True and sub["saving"]["save_adapter"]["ok"] is True
    assert sub["evaluating"]["eval"]["examples"] == 3
    # The seed's step_times: every phase, in order, with its start and its end.
    from trainkit_core.runs.training_run import PHASES

    assert list(stored.step_times) == list(PHASES)
    ends = [(t["start"], t["end"]) for t in stored.step_times.values()]
    assert all(start is not None and end is not None and start <= end for start, end in ends), ends
    assert all(ends[i][1] <= ends[i + 1][0] for i in range(len(ends) - 1)), ends
    # The plan counted, before the run, exactly the tokens the job then trained on.
    from trainkit_core.training.plan import make_plan

    plan = make_plan(provider, {"dataset": "mini", "steps": 200, "save_every": 1000, "batch_size": 4})
    assert plan.tokens_exact and plan.tokens_per_epoch == sub["loading_dataset"]["tokenize"]["tokens"]
    assert plan.examples == 16 and plan.steps_per_epoch == 4 and plan.usd_per_hour == 3600.0
    for step in sub.values():
        for entry in step.values():
            assert entry["end"] >= entry["start"] and entry["seconds"] >= 0


def test_a_run_stopped_before_it_learned_ends_stopped_with_a_warning_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after step 1, in the warm-up (learning rate 0): the adapter does nothing yet, which is no failure.

    The gate's round trip still holds it to what was trained; only "it has an effect" is
    waived for a stopped run, which says so and can be resumed.
    """
    settings, provider = _local_with_mini(tmp_path, monkeypatch)
    config = TrainConfig.parse(dataset="mini", steps=50, save_every=1000, batch_size=4).resolve()
    assert config.warmup_steps > 1  # the first step's learning rate is 0
    store = RunStore.for_provider(provider)
    run = TrainingRun(
        id=new_run_id(),
        provider="local",
        config=config.model_dump(mode="json"),
        dataset_id="mini",
        created_at=time.time(),
    ).attach(store)
    run.save()
    store.stop_flag(run.id).request("stop at once")  # seen at the end of the first step

    result = job.train(job_context(settings, "lc-stop-early"), run.id)

    stored = run.reload()
    assert result["status"] == stored.status == "stopped", stored.error_message
    assert stored.step == 1 and stored.stop_reason == "stop at once"
    assert stored.metrics["gate_effect_max_abs_diff"] <= stored.metrics["gate_effect_minimum"]
    assert stored.metrics["gate_round_trip_max_abs_diff"] <= stored.metrics["gate_round_trip_tolerance"]
    warnings = [e["message"] for e in stored.events.read() if e["type"] == "warning"]
    assert any("no effect on the base model yet" in m for m in warnings), warnings
    final = Path(provider.volume("models").root) / "trained" / run.id  # type: ignore[attr-defined]
    assert (final / "adapter_model.safetensors").is_file() and (final / "trained_model.json").is_file()
    assert [c.step for c in stored.checkpoints()] == [1]  # resumable
