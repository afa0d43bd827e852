"""A picture through `/v1/chat/completions` with `stream: true`, on a vision twin trained for one step on CPU.

The same picture sent as a data URL (streamed) and by URL from an image server on
127.0.0.1 (fetched, not streamed) gets the same greedy answer and the same prompt
length, which holds the picture's tokens; a bad picture in a streaming request is a
4xx before any stream starts.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import TOKEN, Server, serve, sse_events

pytestmark = [pytest.mark.ml, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
PICTURE = "train-red-circle-000.png"


def _shapes(root: Path) -> Path:
    spec = importlib.util.spec_from_file_location("make_shapes_dataset", REPO / "scripts" / "make_shapes_dataset.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder = module.write(root / "shapes", train_per_class=1, eval_per_class=0)
    spec_file = folder / "dataset.toml"  # no eval split: the run skips scoring pictures base vs tuned
    spec_file.write_text(spec_file.read_text().replace('eval = ["eval.jsonl"]\n', ""))
    (folder / "eval.jsonl").unlink()
    return root


class QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _shapes(tmp_path_factory.mktemp("datasets"))


@pytest.fixture(scope="module")
def picture_url(datasets: Path) -> Iterator[str]:
    handler = functools.partial(QuietFiles, directory=str(datasets / "shapes" / "images"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/{PICTURE}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def vision_server(tmp_path_factory: pytest.TempPathFactory, datasets: Path) -> Iterator[Server]:
    from trainkit_core.settings import ApiSettings, ComputeSettings, DatasetSettings, ProviderSettings, Settings

    settings = Settings(
        provider=ProviderSettings(home=tmp_path_factory.mktemp("api-vision-home")),
        datasets=DatasetSettings(datasets_dir=datasets),
        compute=ComputeSettings(infer_idle_timeout_s=15),
        # The picture is served from 127.0.0.1, which a fetch reaches only when allowed.
        api=ApiSettings(api_token=TOKEN, api_fetch_image_urls=True, api_image_fetch_allowed_hosts="127.0.0.1"),
    )
    yield from serve(settings)


@pytest.fixture(scope="module")
def model(vision_server: Server) -> str:
    """A short tiny-gemma3mm run on the shapes pictures, through the API (enough steps to pass the adapter gate)."""
    with vision_server.client(timeout=httpx.Timeout(120.0)) as client:
        created = client.post(
            "/v1/runs",
            json={"dataset": "shapes", "model_size": "tiny-gemma3mm", "steps": 4, "warmup_steps": 0, "save_every": 4},
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        deadline = time.monotonic() + 600
        while (record := client.get(f"/v1/runs/{run_id}").json())["status"] not in ("succeeded", "failed", "stopped"):
            assert time.monotonic() < deadline, record
            time.sleep(1)
    assert record["status"] == "succeeded", record.get("error_message") or record
    return f"trained/{run_id}"


def _request(model: str, image_url: str, **extra: Any) -> dict[str, Any]:
    content = [
        {"type": "text", "text": "What is in the picture?"},
        {"type": "image_url", "image_url": {"url": image_url}},
    ]
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 6, **extra}


def test_a_picture_streams_as_chunks_and_answers_as_when_fetched(
    vision_server: Server, model: str, datasets: Path, picture_url: str
) -> None:
    data = (datasets / "shapes" / "images" / PICTURE).read_bytes()
    data_url = "data:image/png;base64," + base64.b64encode(data).decode()
    streamed = _request(model, data_url, stream=True, stream_options={"include_usage": True})
    with vision_server.client(timeout=httpx.Timeout(300.0)) as client:
        with client.stream("POST", "/v1/chat/completions", json=streamed) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = [e["data"] for e in sse_events(response)]
        fetched = client.post("/v1/chat/completions", json=_request(model, picture_url))
        text_only = client.post(
            "/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": "What is in the picture?"}],
                "max_tokens": 1,
            },
        )
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] in ("stop", "length") and not any(finishes[:-1])
    usage = chunks[-1]["usage"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])

    assert fetched.status_code == 200, fetched.text
    answer = fetched.json()
    assert answer["choices"][0]["message"]["content"] == text  # greedy: the same picture, the same answer
    assert answer["usage"] == usage
    assert usage["prompt_tokens"] > text_only.json()["usage"]["prompt_tokens"] + 4  # the picture's tokens


def test_a_bad_picture_in_a_streaming_request_is_a_4xx_before_any_stream(vision_server: Server, model: str) -> None:
    truncated = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").decode()
    with vision_server.client() as client:
        response = client.post("/v1/chat/completions", json=_request(model, truncated, stream=True))
        not_there = client.post(
            "/v1/chat/completions", json=_request(model, "http://127.0.0.1:9/none.png", stream=True)
        )
    for refused in (response, not_there):
        assert refused.status_code == 400, refused.text
        assert refused.headers["content-type"].startswith("application/json")
        assert "messages[0].content[1]" in refused.json()["error"]["message"]
