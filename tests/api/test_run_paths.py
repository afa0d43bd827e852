"""Runs under `/v1/runs`; the older `/v1/jobs` paths still answer alike and are marked deprecated.

Also the record's one call-id name: `call_id`, with the seed's `function_call_id` beside
it in the JSON (deprecated in the schema), equal to it, for clients written before.
"""

from __future__ import annotations

import time


def _run_operations(spec: dict, prefix: str) -> dict[str, dict]:
    """{path after the prefix: {method: operation}} for the paths under `prefix`."""
    return {path.removeprefix(prefix): ops for path, ops in spec["paths"].items() if path.startswith(prefix)}


def test_every_run_path_has_a_deprecated_jobs_twin(server) -> None:
    spec = server.app.openapi()
    new, old = _run_operations(spec, "/v1/runs"), _run_operations(spec, "/v1/jobs")
    assert {"", "/{run_id}", "/{run_id}/events", "/{run_id}/events/stream", "/{run_id}/cancel"} <= set(new)
    assert set(new) == set(old)
    for suffix, operations in new.items():
        assert set(operations) == set(old[suffix]), suffix
        for method, operation in operations.items():
            assert not operation.get("deprecated"), f"{method} /v1/runs{suffix}"
            twin = old[suffix][method]
            assert twin.get("deprecated") is True, f"{method} /v1/jobs{suffix}"
            assert twin["responses"].keys() == operation["responses"].keys()
    # OpenAI's fine-tuning jobs are jobs in OpenAI's sense, not a deprecated name.
    assert not any(op.get("deprecated") for op in spec["paths"]["/v1/fine_tuning/jobs"].values())


def test_an_old_path_answers_as_the_new_one(server) -> None:
    run = server.new_run(status="succeeded", call_id="lc-123", base_model="trainkit/tiny-gemma", ended_at=time.time())
    run.events.append("status", status="succeeded")
    with server.client() as client:
        new = client.get(f"/v1/runs/{run.id}")
        old = client.get(f"/v1/jobs/{run.id}")
        assert new.status_code == old.status_code == 200
        assert new.json() == old.json()
        listed = {r["id"] for r in client.get("/v1/jobs", params={"limit": 1000}).json()["data"]}
        assert run.id in listed
        events = client.get(f"/v1/jobs/{run.id}/events").json()
        assert [e["type"] for e in events["data"]] == ["status"]
        missing = client.get("/v1/jobs/run-20000101-000000-aaaaaa")
        assert missing.status_code == 404 and missing.json() == client.get("/v1/runs/run-20000101-000000-aaaaaa").json()


def test_the_record_names_its_call_once_and_keeps_the_seeds_names(server) -> None:
    run = server.new_run(status="running", call_id="lc-abc", base_model="google/gemma-3-4b-it")
    with server.client() as client:
        shown = client.get(f"/v1/runs/{run.id}").json()
    assert shown["call_id"] == shown["function_call_id"] == "lc-abc"
    assert shown["base_model"] == shown["source_model"] == "google/gemma-3-4b-it"
    properties = server.app.openapi()["components"]["schemas"]["TrainingRun"]["properties"]
    assert properties["function_call_id"]["deprecated"] is True
    assert properties["source_model"]["deprecated"] is True
    assert not properties["call_id"].get("deprecated") and not properties["base_model"].get("deprecated")
