"""Eval sets, reports and the model listing over HTTP (torch-free: no model is loaded)."""

from __future__ import annotations

import json


def test_add_eval_examples_checks_every_one_first(server) -> None:
    good = [
        {"prompt": "red fox", "completion": "RED FOX"},
        {"messages": [{"role": "user", "content": "big cat"}, {"role": "assistant", "content": "BIG CAT"}]},
    ]
    with server.client() as client:
        added = client.post("/v1/evals/shout/examples", json={"examples": good})
        again = client.post(
            "/v1/evals/shout/examples", json={"examples": [*good[:1], {"prompt": "a b", "completion": "A B"}]}
        )
        bad = client.post(
            "/v1/evals/shout/examples", json={"examples": [{"prompt": "x", "completion": "X"}, {"messages": []}]}
        )
        bad_name = client.post("/v1/evals/Not..A/examples", json={"examples": good})
    assert added.status_code == 201 and added.json() == {"set": "shout", "added": 2, "skipped": 0, "total": 2}
    assert again.json() == {"set": "shout", "added": 1, "skipped": 1, "total": 3}
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("example 2:")
    assert bad_name.status_code == 422 and bad_name.json()["error"]["param"] == "set_name"
    stored = server.provider.volume("eval").read_bytes("sets/shout/examples.jsonl").decode().splitlines()
    assert len(stored) == 3  # the bad request left the set as it was
    assert json.loads(stored[0])["messages"][-1]["content"] == "RED FOX"


def test_reports_and_eval_runs_refuse_what_does_not_exist(server) -> None:
    with server.client() as client:
        missing = client.get("/v1/evals/ev-20260101-000000-abcdef")
        bad_id = client.get("/v1/evals/report-1")
        no_model = client.post("/v1/evals/run", json={"model_path": "trained/run-20260101-000000-abcdef"})
        hostile = client.post("/v1/evals/run", json={"model_path": "../../etc/passwd"})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert bad_id.status_code == 422 and bad_id.json()["error"]["param"] == "report_id"
    assert no_model.status_code == 404
    assert hostile.status_code == 400 and "passwd" not in hostile.json()["error"].get("hint", "")


def test_a_stored_report_is_served(server) -> None:
    from trainkit_core.evals import sets

    report = {"report_id": "ev-20260102-030405-abcdef", "model_path": "trained/run-x", "tuned": {"exact_match": 0.9}}
    sets.write_report(server.provider.volume("eval"), report, [{"prompt": "a", "tuned": "A", "base": "a"}])
    with server.client() as client:
        plain = client.get("/v1/evals/ev-20260102-030405-abcdef").json()
        full = client.get("/v1/evals/ev-20260102-030405-abcdef", params={"examples": "true"}).json()
    assert plain["status"] == "done" and plain["tuned"] == {"exact_match": 0.9} and "examples" not in plain
    assert full["examples"] == [{"prompt": "a", "tuned": "A", "base": "a"}]


def test_models_list_in_the_openai_shape(server) -> None:
    with server.client() as client:
        listing = client.get("/v1/models").json()
        generate = client.post(
            "/v1/generate", json={"model_path": "trained/run-20260101-000000-abcdef", "prompt": "hi"}
        )
        chat = client.post(
            "/v1/chat/completions",
            json={"model": "/etc/passwd", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert listing["object"] == "list" and isinstance(listing["data"], list)
    assert generate.status_code == 404 and generate.json()["error"]["type"] == "not_found_error"
    assert chat.status_code in (400, 404) and chat.json()["error"]["type"] in (
        "invalid_request_error",
        "not_found_error",
    )
