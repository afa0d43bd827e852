"""`runs list` and `runs show` print GPU-seconds and cost, and a group's total. Torch-free."""

from __future__ import annotations

import json
import time

from cli_helpers import run_main

from trainkit_core import get_provider
from trainkit_core.ids import new_run_id
from trainkit_core.runs.training_run import RunStore, TrainingRun


def test_runs_list_and_show_give_each_runs_cost_and_the_groups_total() -> None:
    store = RunStore.for_provider(get_provider("local"))
    price = {"provider": "modal", "gpu": "A10G", "gpus": 1, "usd_per_hour": 3.6}
    runs = []
    for seconds in (1000.0, 2000.0):
        run = TrainingRun(
            id=new_run_id(),
            created_at=time.time(),
            status="stopped",
            duration_seconds=seconds,
            price=price,
            stop_reason="budget: max cost $1 reached",
            metadata={"group_id": "grp-cli"},
        )
        run.attach(store).save()
        runs.append(run)
    code, out = run_main("runs", "list", "--group", "grp-cli", "--json")
    assert code == 0, out
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows[runs[0].id]["cost_usd"] == 1.0 and rows[runs[1].id]["gpu_seconds"] == 2000.0
    code, out = run_main("runs", "list", "--group", "grp-cli")
    assert code == 0 and "group grp-cli: 2 runs, 3000 GPU-s, cost $3.00" in out, out
    code, out = run_main("runs", "show", runs[0].id)
    assert code == 0 and "1000 GPU-s on A10G, cost $1.00 ($3.6/h x 1)" in out, out
    assert "stopped: budget: max cost $1 reached" in out
