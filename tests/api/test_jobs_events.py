"""Jobs and their events over HTTP, on records written straight into the store.

No training here (torch-free): a thread plays the job, appending events and ending
the run, while the client follows the server-sent-event stream.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from api_helpers import sse_events

from trainkit_api.schemas import RunList
from trainkit_api.sse import format_event, parse_last_event_id


def play_job(run, events: int, *, every_s: float = 0.02, end: str = "succeeded") -> threading.Thread:
    """Append `events` progress events to the run, then end it."""

    def work() -> None:
        for step in range(1, events + 1):
            run.events.append("progress", step=step, loss=1.0 / step)
            time.sleep(every_s)
        run.reload()
        run.status = end
        run.ended_at = time.time()
        run.save()
        run.events.append("status", status=end)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_list_filters_and_pages(server) -> None:
    group = f"g{time.time_ns()}"
    made = [server.new_run(status=s, metadata={"group_id": group}) for s in ("succeeded", "failed", "succeeded")]
    made += [server.new_run(status="succeeded")]
    with server.client() as client:
        in_group = client.get("/v1/runs", params={"group_id": group}).json()
        assert [r["id"] for r in in_group["data"]] == sorted((r.id for r in made[:3]), reverse=True)
        assert in_group["has_more"] is False and in_group["next_after"] is None

        raw = client.get("/v1/runs", params={"group_id": group, "limit": 2})
        # Built as text from each record's JSON: exactly what pydantic would give for it.
        assert RunList.model_validate_json(raw.text).model_dump_json() == raw.text
        page1 = raw.json()
        assert page1["has_more"] is True and len(page1["data"]) == 2
        page2 = client.get("/v1/runs", params={"group_id": group, "limit": 2, "after": page1["next_after"]}).json()
        assert page2["has_more"] is False
        raw2 = client.get("/v1/runs", params={"group_id": group, "limit": 2, "after": page1["next_after"]})
        assert RunList.model_validate_json(raw2.text).model_dump_json() == raw2.text
        assert [r["id"] for r in page1["data"] + page2["data"]] == [r["id"] for r in in_group["data"]]

        failed = client.get("/v1/runs", params={"group_id": group, "status": "failed"}).json()["data"]
        assert [r["id"] for r in failed] == [made[1].id]
        bad = client.get("/v1/runs", params={"status": "done"})
        assert bad.status_code == 422 and bad.json()["error"]["param"] == "status"

        one = client.get(f"/v1/runs/{made[0].id}").json()
    assert one["id"] == made[0].id and one["status"] == "succeeded" and one["metadata"]["group_id"] == group


def test_events_page_after_a_sequence_number(server) -> None:
    run = server.new_run(status="running")
    for step in range(1, 6):
        run.events.append("progress", step=step, loss=1.0)
    with server.client() as client:
        page = client.get(f"/v1/runs/{run.id}/events", params={"after": 2}).json()
        limited = client.get(f"/v1/runs/{run.id}/events", params={"after": 0, "limit": 2}).json()
    assert [e["seq"] for e in page["data"]] == [3, 4, 5]
    assert page["data"][0]["type"] == "progress" and page["data"][0]["step"] == 3
    assert page["last_seq"] == 5 and page["done"] is False
    assert [e["seq"] for e in limited["data"]] == [1, 2]


def test_stream_follows_a_run_until_it_ends(server) -> None:
    run = server.new_run(status="running")
    run.events.append("phase", phase="training")
    worker = play_job(run, 20)
    with server.client() as client, client.stream("GET", f"/v1/runs/{run.id}/events/stream") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        received = list(sse_events(response))
    worker.join()
    logged = run.events.read()
    body, end = received[:-1], received[-1]
    assert [int(e["id"]) for e in body] == [e["seq"] for e in logged] == list(range(1, 23))
    assert [e["data"] for e in body] == logged
    assert body[1]["event"] == "progress" and body[-1]["event"] == "status"
    assert end["event"] == "end" and "id" not in end
    assert end["data"]["status"] == "succeeded" and end["data"]["last_seq"] == 22


def test_reconnect_with_last_event_id_gets_exactly_the_missed_events(server) -> None:
    run = server.new_run(status="running")
    worker = play_job(run, 30, every_s=0.06)
    url = f"/v1/runs/{run.id}/events/stream"
    with server.client() as client:
        first: list[dict[str, Any]] = []
        with client.stream("GET", url) as response:
            for event in sse_events(response):
                first.append(event)
                if len(first) == 7:
                    break  # the connection drops mid-run
        assert not run.reload().done()
        with client.stream("GET", url, headers={"Last-Event-ID": first[-1]["id"]}) as response:
            rest = list(sse_events(response))
    worker.join()
    seqs = [int(e["id"]) for e in first + rest[:-1]]
    assert seqs == list(range(1, 32))  # every event once, in order: nothing missed, nothing twice
    assert rest[-1]["event"] == "end"


def test_stream_of_an_ended_run_replays_and_ends(server) -> None:
    run = server.new_run(status="failed", error_message="boom")
    run.events.append("status", status="failed", reason="boom")
    with server.client() as client:
        with client.stream("GET", f"/v1/runs/{run.id}/events/stream", params={"after": 0}) as response:
            events = list(sse_events(response))
        with client.stream("GET", f"/v1/runs/{run.id}/events/stream", headers={"Last-Event-ID": "1"}) as response:
            after_all = list(sse_events(response))
        missing = client.get("/v1/runs/run-20200101-000000-000001/events/stream")
    assert [e.get("event") for e in events] == ["status", "end"]
    assert events[1]["data"]["error"] == "boom"
    assert [e.get("event") for e in after_all] == ["end"]
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"


def test_stop_sets_the_flag_and_cancel_ends_the_run(server) -> None:
    handle = server.provider.spawn("sleep", seconds=120)
    run = server.new_run(status="running", call_id=handle.call_id)
    with server.client() as client:
        stopped = client.post(f"/v1/runs/{run.id}/stop")
        assert stopped.status_code == 202 and stopped.json()["id"] == run.id
        assert server.store.stop_flag(run.id).is_set()
        assert run.events.read()[-1]["message"] == "stop requested through the API"

        cancelled = client.post(f"/v1/runs/{run.id}/cancel").json()
        assert cancelled["status"] == "stopped" and cancelled["error_message"].startswith("cancelled")
        again = client.post(f"/v1/runs/{run.id}/cancel")
    assert again.status_code == 409 and again.json()["error"]["type"] == "conflict_error"
    assert handle.status().state == "cancelled"


def test_checkpoints_lists_complete_ones(server) -> None:
    run = server.new_run(status="running")
    models = server.provider.volume("models")
    for step, done in ((10, True), (20, True), (30, False)):
        base = f"trained/{run.id}/checkpoints/{step:08d}"
        models.write_bytes(f"{base}/adapter_config.json", b"{}")
        if done:
            models.write_bytes(f"{base}/done", b"")
    with server.client() as client:
        data = client.get(f"/v1/runs/{run.id}/checkpoints").json()["data"]
    assert data == [
        {"step": 10, "path": f"trained/{run.id}/checkpoints/00000010"},
        {"step": 20, "path": f"trained/{run.id}/checkpoints/00000020"},
    ]


@pytest.mark.slow
def test_a_run_whose_job_died_is_reported_failed(server) -> None:
    """The reconciler runs on read: a run left `running` by a dead job shows `failed`."""
    handle = server.provider.spawn("fail", message="worker crashed")
    try:
        handle.wait(timeout=60)
    except Exception:
        pass
    run = server.new_run(status="running", call_id=handle.call_id)
    with server.client() as client:
        listed = {r["id"]: r for r in client.get("/v1/runs").json()["data"]}
        shown = client.get(f"/v1/runs/{run.id}").json()
    assert listed[run.id]["status"] == "failed"
    assert shown["status"] == "failed" and "worker crashed" in shown["error_message"]


def test_sse_wire_format() -> None:
    assert format_event({"a": 1}, event="progress", id=3) == 'id: 3\nevent: progress\ndata: {"a":1}\n\n'
    assert format_event("[DONE]") == "data: [DONE]\n\n"
    assert parse_last_event_id(" 12 ") == 12
    assert parse_last_event_id(None) is None and parse_last_event_id(" ") is None
    for bad in ("x1", "\u00b2", "1_0", "+1", "-1", "1.0", "\u0661"):
        with pytest.raises(ValueError):
            parse_last_event_id(bad)


def test_events_come_from_the_history_once_the_live_log_is_gone(server) -> None:
    """A run whose key-value entries expired is served from its history on the models volume."""
    run = server.new_run(status="running")
    for step in (1, 2, 3):
        run.events.append("progress", step=step)
    run.status = "succeeded"
    run.save()
    run.events.append("status", status="succeeded")
    run.write_history()
    run.events.delete()
    server.store.records.delete(run.id)  # the record too: it is read from the history
    with server.client() as client:
        page = client.get(f"/v1/runs/{run.id}/events", params={"after": 1}).json()
        with client.stream("GET", f"/v1/runs/{run.id}/events/stream", headers={"Last-Event-ID": "2"}) as response:
            streamed = list(sse_events(response))
        shown = client.get(f"/v1/runs/{run.id}").json()
    assert shown["status"] == "succeeded"
    assert [e["seq"] for e in page["data"]] == [2, 3, 4] and page["last_seq"] == 4 and page["done"] is True
    assert [int(e["id"]) for e in streamed[:-1]] == [3, 4]
    assert streamed[-1]["event"] == "end" and streamed[-1]["data"]["last_seq"] == 4
