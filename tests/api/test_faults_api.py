"""Faults and hostile input met through the web API: nothing lost, nothing corrupted, errors named.

Each test is one class of bug that a fault probe found (issue 29); docs/records/faults.md
lists them. One real server (uvicorn on 127.0.0.1) per module, with a token.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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
