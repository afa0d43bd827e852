"""The API end to end with real training (tiny model, CPU): one run shared by the module.

Over HTTP on a real uvicorn server: start a run, follow its event stream, drop the
connection mid-run and resume with `Last-Event-ID`, stop the run, then generate from
its model with `/v1/generate` and with the official `openai` client.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import ml_settings, serve, sse_events

pytestmark = [pytest.mark.ml, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
STEPS = 3000  # far more than it will do: the test stops it
STOP_AFTER = 3  # progress steps seen before the stream is dropped and the run stopped


def small_dataset(root: Path) -> Path:
    """64 demo conversations, no eval split (so the run skips the post-training eval: CI time)."""
    lines = (REPO / "datasets" / "demo" / "train.jsonl").read_text().splitlines()[:64]
    folder = root / "apidemo"
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "dataset.toml").write_text(
        'name = "apidemo"\ndescription = "Uppercasing, for the API tests."\nformat = "chat"\ntrain = ["train.jsonl"]\n'
    )
    return root


@pytest.fixture(scope="module")
def ml_server(tmp_path_factory: pytest.TempPathFactory):
    home, datasets = tmp_path_factory.mktemp("api-ml-home"), small_dataset(tmp_path_factory.mktemp("api-datasets"))
    yield from serve(ml_settings(home, datasets))


@pytest.fixture(scope="module")
def stopped_run(ml_server) -> dict[str, Any]:
    """Start a tiny run, follow it, reconnect mid-run, stop it, follow to the end."""
    with ml_server.client(timeout=httpx.Timeout(120.0)) as client:
        created = client.post(
            "/v1/runs",
            json={
                "dataset": "apidemo",
                "model_size": "tiny",
                "steps": STEPS,
                "save_every": 1000,
                "metadata": {"group_id": "api-ml"},
            },
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        url = f"/v1/runs/{run_id}/events/stream"

        first: list[dict[str, Any]] = []
        with client.stream("GET", url) as response:
            for event in sse_events(response):
                first.append(event)
                if event.get("event") == "progress" and event["data"]["step"] >= STOP_AFTER:
                    break  # drop the connection while the run trains
                assert event.get("event") != "end", f"the run ended before training: {first}"
        stop = client.post(f"/v1/runs/{run_id}/stop")

        rest: list[dict[str, Any]] = []
        with client.stream("GET", url, headers={"Last-Event-ID": first[-1]["id"]}) as response:
            rest = list(sse_events(response))
        record = client.get(f"/v1/runs/{run_id}").json()
        events = client.get(f"/v1/runs/{run_id}/events", params={"limit": 10_000}).json()
    return {
        "run_id": run_id,
        "created": created.json(),
        "stop": stop,
        "first": first,
        "rest": rest,
        "record": record,
        "events": events,
    }


def test_the_stream_resumes_with_exactly_the_missed_events(stopped_run) -> None:
    first, rest = stopped_run["first"], stopped_run["rest"]
    logged = [e["seq"] for e in stopped_run["events"]["data"]]
    streamed = [int(e["id"]) for e in first + rest[:-1]]
    assert streamed == logged == list(range(1, len(logged) + 1))  # each event once, none missing
    assert int(rest[0]["id"]) == int(first[-1]["id"]) + 1
    assert rest[-1]["event"] == "end" and rest[-1]["data"]["status"] == "stopped"
    assert {"status", "phase", "progress"} <= {e["event"] for e in first + rest[:-1]}


def test_stop_ends_the_run_stopped_with_its_adapter(stopped_run, ml_server) -> None:
    run_id, record = stopped_run["run_id"], stopped_run["record"]
    assert stopped_run["created"]["status"] == "pending" and stopped_run["created"]["metadata"]["group_id"] == "api-ml"
    assert stopped_run["stop"].status_code == 202
    assert record["status"] == "stopped" and STOP_AFTER <= record["step"] < STEPS
    models = ml_server.provider.volume("models")
    assert models.exists(f"trained/{run_id}/adapter_model.safetensors")
    with ml_server.client() as client:
        listed = client.get("/v1/runs", params={"group_id": "api-ml"}).json()["data"]
        checkpoints = client.get(f"/v1/runs/{run_id}/checkpoints").json()["data"]
        model_ids = [m["id"] for m in client.get("/v1/models").json()["data"]]
    assert [r["id"] for r in listed] == [run_id]
    assert checkpoints and checkpoints[-1]["step"] == record["step"]
    assert f"trained/{run_id}" in model_ids


def test_generate_from_its_model_plain_and_streamed(stopped_run, ml_server) -> None:
    request = {"model_path": f"trained/{stopped_run['run_id']}", "prompt": "quiet river", "max_new_tokens": 12}
    with ml_server.client(timeout=httpx.Timeout(180.0)) as client:
        answer = client.post("/v1/generate", json=request)
        assert answer.status_code == 200, answer.text
        with client.stream("POST", "/v1/generate", json={**request, "stream": True}) as response:
            events = list(sse_events(response))
    result = answer.json()
    assert isinstance(result["text"], str) and result["finish_reason"] in ("stop", "length")
    assert result["usage"]["completion_tokens"] >= 1
    tokens = [e["data"]["text"] for e in events if e.get("event") == "token"]
    assert events[-1]["event"] == "done"
    assert "".join(tokens) == events[-1]["data"]["text"] == result["text"]  # greedy: the same answer


def test_the_openai_client_gets_chat_completions(stopped_run, ml_server) -> None:
    # Imported here, not at module level: the torch-free sessions collect this module
    # (its tests deselected), and a module-level import skip would count there.
    openai = pytest.importorskip("openai")
    model = f"trained/{stopped_run['run_id']}"
    client = openai.OpenAI(base_url=ml_server.url + "/v1", api_key=ml_server.token, timeout=180, max_retries=0)
    messages = [{"role": "user", "content": "quiet river"}]

    completion = client.chat.completions.create(model=model, messages=messages, max_tokens=12)
    assert completion.object == "chat.completion" and completion.model == model
    text = completion.choices[0].message.content
    assert isinstance(text, str) and completion.choices[0].finish_reason in ("stop", "length")
    assert completion.usage.completion_tokens >= 1

    chunks = list(
        client.chat.completions.create(
            model=model, messages=messages, max_tokens=12, stream=True, stream_options={"include_usage": True}
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == completion.usage.completion_tokens

    assert model in [m.id for m in client.models.list().data]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=ml_server.url + "/v1", api_key="wrong", max_retries=0).models.list()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="trained/run-20200101-000000-000000", messages=messages)


def test_resume_continues_a_stopped_run(stopped_run, ml_server) -> None:
    """Resume is accepted for the stopped run, then stopped again at once (kept short)."""
    run_id = stopped_run["run_id"]
    with ml_server.client() as client:
        resumed = client.post(f"/v1/runs/{run_id}/resume")
        assert resumed.status_code == 202, resumed.text
        assert resumed.json()["status"] == "pending" and resumed.json()["attempt"] == 2
        again = client.post(f"/v1/runs/{run_id}/resume")
        assert again.status_code == 409 and again.json()["error"]["type"] == "conflict_error"
        client.post(f"/v1/runs/{run_id}/cancel")
        deadline = time.monotonic() + 60
        while client.get(f"/v1/runs/{run_id}").json()["status"] in ("pending", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.5)
