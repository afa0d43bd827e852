"""Time and money of runs: the price table, a run's GPU-seconds and cost, a sweep's total.

Torch-free. A test price table (a user's TRAINKIT_PRICES_FILE) and fixed durations
stand for real prices and wall time, so every figure is exact.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import UsageError
from trainkit_core.ids import new_run_id
from trainkit_core.runs.pricing import group_totals, load_table, price_for, price_for_run, split_gpu
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import Settings


def test_the_packaged_table_is_dated_and_sourced_and_local_runs_are_free() -> None:
    table = load_table()
    assert table["date"] and "modal.com/pricing" in table["modal"]["source"]
    a10g = price_for("modal", "A10G", table=table)
    assert a10g["usd_per_hour"] == table["modal"]["gpus"]["A10G"] > 0 and a10g["gpus"] == 1
    assert price_for("modal", "A10", table=table)["gpu"] == "A10G"  # Modal accepts both spellings
    assert price_for("modal", "h100:2", table=table)["gpus"] == 2
    assert price_for("modal", "Z99", table=table)["usd_per_hour"] is None  # unknown: no guess
    assert price_for("local", "", table=table) == {**price_for("local", "", table=table), "gpu": "cpu", "gpus": 0}
    assert price_for("local", "", table=table)["usd_per_hour"] == 0.0
    assert price_for("local", "A10G", table=table)["usd_per_hour"] == 0.0


def test_a_users_table_overrides_and_prices_local_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('date = "2026-12-01"\n[local.gpus]\ncpu = 0.36\n[modal.gpus]\nA10G = 2.0\n')
    monkeypatch.setenv("TRAINKIT_PRICES_FILE", str(prices))
    provider = get_provider("local", Settings.from_env())
    mine = price_for_run(provider, "")
    assert mine["usd_per_hour"] == 0.36 and mine["source"] == str(prices) and mine["table_date"] == "2026-12-01"
    table = load_table(prices)
    assert price_for("modal", "A10G", table=table)["usd_per_hour"] == 2.0
    assert price_for("modal", "T4", table=table)["usd_per_hour"] == load_table()["modal"]["gpus"]["T4"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("[local.gpus]\ncpu = -1\n", "local.gpus.cpu must be a number >= 0"), ("not toml [", "is not valid TOML")],
)
def test_a_bad_price_table_is_refused_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(text)
    with pytest.raises(UsageError, match=message) as info:
        load_table(prices)
    assert str(prices) in info.value.message
    with pytest.raises(UsageError, match="count after ':'"):
        split_gpu("A100:x")


def _run(store: RunStore, seconds: float, price: dict[str, object], group: str) -> TrainingRun:
    run = TrainingRun(
        id=new_run_id(),
        created_at=time.time(),
        status="succeeded",
        duration_seconds=seconds,
        price=price,
        metadata={"group_id": group},
    )
    run.attach(store).save()
    return run


def test_gpu_seconds_and_cost_follow_job_time_and_price_and_a_sweep_totals_its_runs() -> None:
    store = RunStore.for_provider(get_provider("local"))
    price = {"provider": "modal", "gpu": "H100", "gpus": 2, "usd_per_hour": 3.6}
    runs = [_run(store, s, price, "grp-test") for s in (100.0, 200.0, 300.0)]
    assert (runs[0].gpu_seconds, runs[0].cost_usd) == (200.0, 0.2)  # 2 GPUs x 100 s at $3.60/h each
    stored = store.records.get(runs[0].id)
    assert stored["gpu_seconds"] == 200.0 and stored["cost_usd"] == 0.2
    totals = group_totals(store.list(group_id="grp-test"))
    assert totals["runs"] == 3 and totals["gpu_seconds"] == sum(r.gpu_seconds for r in runs) == 1200.0
    assert totals["cost_usd"] == pytest.approx(sum(r.cost_usd or 0 for r in runs)) == pytest.approx(1.2)

    # A CPU run has no GPU-seconds; it costs what its machine is priced at (0 on `local`).
    cpu = _run(store, 3600.0, {"provider": "local", "gpu": "cpu", "gpus": 0, "usd_per_hour": 0.5}, "grp-cpu")
    assert (cpu.gpu_seconds, cpu.cost_usd) == (0.0, 0.5)
    unpriced = _run(store, 10.0, {}, "grp-cpu")
    assert unpriced.cost_usd is None and group_totals([cpu, unpriced])["cost_usd"] is None


def test_a_running_run_costs_what_its_attempt_has_used_so_far() -> None:
    run = TrainingRun(
        id=new_run_id(),
        duration_seconds=60.0,  # an earlier attempt
        attempt_started_at=1000.0,
        price={"gpus": 1, "usd_per_hour": 36.0},
    )
    assert run.job_seconds(now=1040.0) == 100.0 and run.cost_at(now=1040.0) == 1.0
    assert run.accounting(now=1040.0)["gpu_seconds"] == 100.0


# --------------------------------------------------------------------------- budgets


def test_a_budget_is_checked_before_a_run_starts() -> None:
    from trainkit_core.training.budget import check_budget

    priced = {"provider": "modal", "gpu": "A10G", "gpus": 1, "usd_per_hour": 1.1}
    assert check_budget({"max_cost_usd": 2, "max_duration_s": None}, priced) == {"max_cost_usd": 2.0}
    with pytest.raises(UsageError, match="max_duration_s must be a positive number"):
        check_budget({"max_duration_s": -5}, priced)
    with pytest.raises(UsageError, match="unknown budget limit 'max_gpus'"):
        check_budget({"max_gpus": 1}, priced)
    with pytest.raises(UsageError, match="no price for GPU Z99 on provider modal"):
        check_budget({"max_cost_usd": 2}, {"provider": "modal", "gpu": "Z99", "usd_per_hour": None})
    assert check_budget({"max_duration_s": 60}, {"usd_per_hour": None}) == {"max_duration_s": 60.0}


def test_a_sweeps_budget_counts_the_whole_group(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainkit_core.training import budget

    monkeypatch.setattr(budget, "clock", lambda: 10_000.0)  # a test clock
    store = RunStore.for_provider(get_provider("local"))
    price = {"provider": "modal", "gpu": "A10G", "gpus": 1, "usd_per_hour": 36.0}  # a cent a second
    done = [_run(store, s, price, "grp-budget") for s in (100.0, 200.0)]  # $1 and $2
    running = TrainingRun(
        id=new_run_id(),
        created_at=time.time(),
        status="running",
        attempt_started_at=10_000.0 - 50.0,  # $0.50 so far
        price=price,
        budget={"group_max_cost_usd": 4.0},
        metadata={"group_id": "grp-budget"},
    ).attach(store)
    running.save()
    watch = budget.RunBudget.for_run(running)
    assert watch is not None
    watch.start()
    try:
        assert watch.spent()["group_max_cost_usd"] == pytest.approx(3.5) and watch.exceeded() is None
        monkeypatch.setattr(budget, "clock", lambda: 10_000.0 + 50.0)  # a minute in: $1.00 for this run
        watch.read_group()
        assert watch.exceeded() == "budget reached: the sweep's max cost $4"
    finally:
        watch.close()
    assert budget.group_over_budget([*done, running], {"group_max_cost_usd": 4.0}) is not None
    assert budget.group_over_budget(done, {"group_max_cost_usd": 4.0}) is None
