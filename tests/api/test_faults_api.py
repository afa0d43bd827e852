"""Faults and hostile input met through the web API: nothing lost, nothing corrupted, errors named.

Each test is one class of bug that a fault probe found (issue 29); docs/records/faults.md
lists them. One real server (uvicorn on 127.0.0.1) per module, with a token.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from api_helpers import Server

from trainkit_core.evals.sets import read_set


def test_parallel_eval_uploads_keep_every_example(server: Server) -> None:
    def upload(writer: int) -> dict:
        examples = [{"prompt": f"w{writer} q{i}", "completion": f"a{i}"} for i in range(20)]
        with server.client() as client:
            response = client.post("/v1/evals/parallel/examples", json={"examples": examples})
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(upload, range(6)))
    assert all(a["added"] == 20 for a in answers)
    assert sorted(a["total"] for a in answers) == [20, 40, 60, 80, 100, 120]  # each saw the ones before it
    stored = read_set(server.provider.volume("eval"), "parallel")
    assert len(stored) == 120 and {e["messages"][0]["content"] for e in stored} == {
        f"w{w} q{i}" for w in range(6) for i in range(20)
    }


def test_what_a_client_adds_to_a_running_run_survives_the_jobs_saves(server: Server, tmp_path: Path) -> None:
    """The job holds its own copy of the record and writes it back at every progress save."""
    from trainkit_core.runs import RunStore
    from trainkit_core.training.background import JobWrites

    run = server.new_run(status="running", phase="training", step=1)
    job_copy = RunStore.for_provider(server.provider).get(run.id)  # the job's store, as in its own process
    writes = JobWrites(job_copy).start()
    chart = tmp_path / "chart.svg"
    chart.write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    try:
        for step in range(2, 40):
            job_copy.step = step
            job_copy.save()  # queued, written by the job's background writer
            if step == 10:
                run.add_dashboard_component(name="chart", component_type="svg", from_path=chart)
            if step == 20:
                run.record_latest_rollout({"step": 20, "samples": ["from a client"]})
        job_copy.record_latest_rollout({"step": 30, "samples": ["from the job"]})
    finally:
        writes.close()
    job_copy.step = 40
    job_copy.save()
    with server.client() as client:
        record = client.get(f"/v1/jobs/{run.id}").json()
        assert client.get(f"/v1/jobs/{run.id}/components/chart").status_code == 200
    assert record["step"] == 40
    stored = server.store.get(run.id)
    assert [c["name"] for c in stored.dashboard_components] == ["chart"]
    assert stored.latest_rollout is not None and stored.latest_rollout["samples"] == ["from the job"]


@pytest.mark.slow
def test_a_run_whose_submitter_died_before_saving_the_call_id_is_cancellable(server: Server) -> None:
    """`kill -9` of the server right after `POST /v1/jobs`: the job runs, the record has no `function_call_id`.

    A detached `sleep` job stands in for the training job; like it, the job's first
    save records its own call id (`attempt_call_id`) on the run.
    """
    handle = server.provider.spawn("sleep", seconds=120)
    run = server.new_run(status="running", attempt_call_id=handle.call_id)
    run.created_at = run.updated_at = time.time() - 20 * 60  # beyond the reconciler's patience for runs without a job
    run.store.records.put(run.id, run.model_dump(mode="json"))
    never_started = server.new_run(status="pending")
    try:
        with server.client() as client:
            shown = client.get(f"/v1/jobs/{run.id}").json()
            assert shown["status"] == "running"  # the reconciler finds the job alive through its own id
            cancelled = client.post(f"/v1/jobs/{run.id}/cancel")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "stopped"
            assert handle.status().state == "cancelled"  # the job itself ended, not only the record
            # No job id at all yet: the cancel cannot reach anything, so it does not answer success.
            refused = client.post(f"/v1/jobs/{never_started.id}/cancel")
            assert refused.status_code == 409 and "cannot be reached" in refused.json()["error"]["message"]
            assert client.get(f"/v1/jobs/{never_started.id}").json()["status"] == "pending"
    finally:
        handle.cancel()
