"""Costs and plans through the API: a run's cost in its record, a group's total. Torch-free."""

from __future__ import annotations

import time

from api_helpers import Server

from trainkit_core.ids import new_run_id
from trainkit_core.runs.training_run import TrainingRun
from trainkit_core.training.plan import cuda_device_name


def test_a_groups_total_is_the_sum_of_its_runs(server: Server) -> None:
    group = f"grp-api-{time.time_ns()}"
    price = {"provider": "modal", "gpu": "A100-80GB", "gpus": 2, "usd_per_hour": 1.8}
    ids = []
    for seconds in (100.0, 300.0):
        run = TrainingRun(
            id=new_run_id(),
            created_at=time.time(),
            status="succeeded",
            duration_seconds=seconds,
            price=price,
            metadata={"group_id": group},
        )
        run.attach(server.store).save()
        ids.append(run.id)
    with server.client() as client:
        one = client.get(f"/v1/runs/{ids[0]}").json()
        assert (one["gpu_seconds"], one["cost_usd"]) == (200.0, 0.1)
        assert one["training_run_id"] == ids[0] and one["framework_status"] == one["phase"]
        body = client.get(f"/v1/groups/{group}").json()
        assert sorted(r["id"] for r in body["runs"]) == sorted(ids)
        assert body["totals"]["gpu_seconds"] == sum(r["gpu_seconds"] for r in body["runs"]) == 800.0
        assert body["totals"]["cost_usd"] == sum(r["cost_usd"] for r in body["runs"]) == 0.4
        missing = client.get("/v1/groups/grp-none")
        assert missing.status_code == 404 and "no run in group" in missing.text


def test_a_dry_run_answers_the_plan_and_starts_nothing(server: Server) -> None:
    with server.client() as client:
        before = client.get("/v1/runs").json()["data"]
        answer = client.post("/v1/runs", params={"dry_run": "true"}, json={"dataset": "demo", "model_size": "4b"})
        assert answer.status_code == 200, answer.text
        plan = answer.json()
        assert plan["dataset"] == "demo" and plan["examples"] > 0
        assert plan["tokens_exact"] is False and plan["tokens_method"] == "4 characters per token"  # an estimate
        assert plan["steps"] >= 1 and plan["estimated_cost_usd"] == 0.0  # the local provider is free
        # local has no cloud GPUs: the 4b preset is planned where it would run, not on its A10G
        assert plan["gpu"] == (cuda_device_name() or "cpu")
        assert any("no cloud GPUs" in note for note in plan["notes"])
        assert client.get("/v1/runs").json()["data"] == before
        bad = client.post("/v1/runs", params={"dry_run": "true"}, json={"dataset": "no-such-set"})
        assert bad.status_code == 404 and "no-such-set" in bad.text
