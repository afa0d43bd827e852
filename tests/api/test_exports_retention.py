"""Exports and run deletion over HTTP (torch-free: the export job itself is tested in tests/e2e/test_export.py)."""

from __future__ import annotations

import json


def test_export_routes_check_first_and_serve_a_stored_export(server) -> None:
    run_id = "run-20261201-010203-abcdef"
    info = {"format": "merged", "model_path": f"trained/{run_id}", "dtype": "float32", "notes": []}
    server.provider.volume("models").write_bytes(f"exports/{run_id}/trainkit_export.json", json.dumps(info).encode())
    with server.client() as client:
        missing_model = client.post("/v1/exports", json={"model_path": "trained/run-20260101-000000-abcdef"})
        hostile = client.post("/v1/exports", json={"model_path": "../../etc/passwd"})
        bad_dtype = client.post("/v1/exports", json={"model_path": f"trained/{run_id}", "dtype": "int3"})
        stored = client.get(f"/v1/exports/{run_id}")
        unknown = client.get("/v1/exports/run-20260101-000000-abcdef")
        bad_name = client.get("/v1/exports/..%2Ftrained")
    assert missing_model.status_code == 404 and hostile.status_code == 400 and bad_dtype.status_code == 422
    assert stored.status_code == 200 and stored.json()["status"] == "done" and stored.json()["dtype"] == "float32"
    assert stored.json()["export_path"] == f"exports/{run_id}"
    assert unknown.status_code == 404 and bad_name.status_code in (404, 422)


def test_delete_job_refuses_a_running_run_and_deletes_a_finished_one(server) -> None:
    running = server.new_run(status="running", phase="training")
    done = server.new_run(status="succeeded")
    server.provider.volume("models").write_bytes(f"trained/{done.id}/adapter_model.safetensors", b"w" * 1234)
    with server.client() as client:
        refused = client.delete(f"/v1/runs/{running.id}")
        dry = client.delete(f"/v1/runs/{done.id}", params={"dry_run": "true"})
        gone = client.delete(f"/v1/runs/{done.id}")
        again = client.delete(f"/v1/runs/{done.id}")
        listed = [j["id"] for j in client.get("/v1/runs").json()["data"]]
    assert refused.status_code == 409 and "is running" in refused.json()["error"]["message"]
    assert dry.json()["deleted"] is False and dry.json()["bytes"] == 1234
    assert gone.status_code == 200 and gone.json()["bytes"] == 1234 and gone.json()["deleted"] is True
    assert again.status_code == 404
    assert done.id not in listed and running.id in listed


def test_an_export_with_a_quant_but_no_gguf_is_refused(server) -> None:
    """The API's GGUF type is `gguf` itself; a `quant` (the CLI's spelling) is refused, not ignored."""
    run_id = "run-20261202-010203-fedcba"
    with server.client() as client:
        refused = client.post("/v1/exports", json={"model_path": f"trained/{run_id}", "quant": "q8_0"})
        bad_type = client.post("/v1/exports", json={"model_path": f"trained/{run_id}", "gguf": "q2_k_s"})
    assert refused.status_code == 422 and "quant" in refused.text, refused.text
    assert bad_type.status_code == 422 and "gguf" in bad_type.text
    assert not server.provider.volume("models").exists(f"exports/{run_id}/trainkit_export.json")


def test_an_export_whose_latest_job_failed_is_not_done_with_the_old_export(server) -> None:
    """An older export at the path is not the answer for the export job started after it."""
    import pytest

    from trainkit_core.errors import TrainkitError

    run_id = "run-20261201-010203-abcdef"
    path = f"exports/{run_id}"
    server.provider.volume("models").write_bytes(
        f"{path}/trainkit_export.json", json.dumps({"format": "merged"}).encode()
    )
    # A real export job that fails (its model was never trained), kept as the path's latest job.
    handle = server.provider.spawn("export", model_path=f"trained/{run_id}", dtype="auto")
    server.provider.kv("api_exports").put(path, handle.call_id)
    with pytest.raises(TrainkitError):
        handle.wait(timeout=300)
    with server.client() as client:
        answer = client.get(f"/v1/exports/{run_id}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "failed" and answer.json()["error"], answer.json()
