"""Every generation input has a bound, and an answer naming it.

Text and image data URLs are bounded before any model is near (a 413 naming the part);
the model's context is the bound in tokens, checked where the model is loaded
(`tests/core/test_infer_bounds.py`). An empty list of parts is no question: a 422.
"""

from __future__ import annotations

import httpx
import pytest
from api_helpers import Server

from trainkit_core.inference.request import MAX_DATA_URL_CHARS, MAX_PROMPT_CHARS

MODEL = "trained/run-20260101-000000-abcdef"  # does not exist: a request that passes the bounds gets a 404


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


def huge_url() -> str:
    return "data:image/png;base64," + "A" * (MAX_DATA_URL_CHARS + 4)


def parts(url: str) -> list[dict[str, object]]:
    return [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": url}}]


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/generate"])
def test_an_empty_list_of_parts_is_a_422_naming_the_content(server: Server, route: str) -> None:
    messages = [{"role": "user", "content": []}]
    body = {"model": MODEL, "messages": messages} if "chat" in route else {"model_path": MODEL, "messages": messages}
    with server.client() as client:
        response = client.post(route, json=body)
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert "messages[0].content" in error["message"] and "empty list" in error["message"], error


def test_an_empty_list_in_an_earlier_turn_is_refused_too(server: Server) -> None:
    messages = [{"role": "system", "content": []}, {"role": "user", "content": "hi"}]
    with server.client() as client:
        response = client.post("/v1/chat/completions", json={"model": MODEL, "messages": messages})
    assert response.status_code == 422 and "messages[0].content" in error_of(response)["message"], response.text


@pytest.mark.parametrize(
    ("route", "body", "part"),
    [
        (
            "/v1/chat/completions",
            {"model": MODEL, "messages": [{"role": "user", "content": parts("URL")}]},
            "messages[0].content[1]",
        ),
        (
            "/v1/generate",
            {"model_path": MODEL, "messages": [{"role": "user", "content": parts("URL")}]},
            "messages[0].content[1]",
        ),
        ("/v1/generate", {"model_path": MODEL, "prompt": "hi", "images": ["URL"]}, "images[0]"),
    ],
    ids=["chat-completions", "generate-messages", "generate-images"],
)
def test_a_data_url_over_the_limit_is_a_413_naming_the_part(server: Server, route: str, body: dict, part: str) -> None:
    import json

    content = json.dumps(body).replace('"URL"', json.dumps(huge_url()))
    with server.client(timeout=120) as client:
        response = client.post(route, content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text[:500]
    error = error_of(response)
    assert error["type"] == "request_too_large"
    assert part in error["message"] and str(MAX_DATA_URL_CHARS) in error["message"], error
    assert "union" not in error["message"] and "list[" not in error["message"], error  # no pydantic dump


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/generate"])
def test_text_over_any_context_is_a_413_before_the_model_lookup(server: Server, route: str) -> None:
    text = "word " * (MAX_PROMPT_CHARS // 5 + 1)
    messages = [{"role": "user", "content": [{"type": "text", "text": text}]}]
    body = {"model": MODEL, "messages": messages} if "chat" in route else {"model_path": MODEL, "prompt": text}
    with server.client(timeout=120) as client:
        response = client.post(route, json=body)
    assert response.status_code == 413, response.text[:500]
    assert str(MAX_PROMPT_CHARS) in error_of(response)["message"]


def test_a_data_url_and_text_within_the_limits_reach_the_model_lookup(server: Server) -> None:
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    messages = [{"role": "user", "content": [{"type": "text", "text": "x" * 100_000}, *parts(url)[1:]]}]
    with server.client() as client:
        response = client.post("/v1/chat/completions", json={"model": MODEL, "messages": messages})
    assert response.status_code == 404, response.text[:500]  # past every bound; the model does not exist


# ------------------------------------------------------------ the model's context


@pytest.mark.ml
@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/generate"])
def test_a_prompt_past_the_models_context_is_a_413_naming_it(trainkit_home, route: str) -> None:  # type: ignore[no-untyped-def]
    """Through the warm worker, on the tiny base (1024 positions): refused on its tokens, before the model runs."""
    import sys
    from pathlib import Path

    from api_helpers import TOKEN, serve, settings_for

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from trainkit_fake_models import make_fake_model

    volumes = trainkit_home / "volumes"
    model = make_fake_model(volumes / "trainkit-models", volumes / "trainkit-hf-cache")
    prompt = "snow blue " * 3000  # about 6000 tokens
    messages = [{"role": "user", "content": prompt}]
    body = {"model": model, "messages": messages} if "chat" in route else {"model_path": model, "prompt": prompt}
    servers = serve(settings_for(trainkit_home, TOKEN))
    server = next(servers)
    try:
        with server.client(timeout=300) as client:
            response = client.post(route, json=body)
            assert response.status_code == 413, response.text[:500]
            error = error_of(response)
            assert error["type"] == "request_too_large" and "context of 1024 tokens" in error["message"], error
            streamed = client.post(route, json={**body, "stream": True})
            assert "context of 1024 tokens" in streamed.text, streamed.text[:500]  # the stream's error event
            short = (
                {**body, "messages": [{"role": "user", "content": "hi"}]}
                if "chat" in route
                else {**body, "prompt": "hi"}
            )
            assert (
                client.post(route, json={**short, "max_tokens" if "chat" in route else "max_new_tokens": 2}).status_code
                == 200
            )
    finally:
        servers.close()


@pytest.mark.ml
def test_through_the_infer_job_the_refusal_keeps_its_413(trainkit_home) -> None:  # type: ignore[no-untyped-def]
    """Where the host cuts requests off (`answer_within_s`), generation is an infer job call: its refusal is a 413 too."""
    import sys
    import threading
    import time
    from pathlib import Path

    import uvicorn
    from api_helpers import TOKEN, free_port, settings_for

    from trainkit_api.app import create_app
    from trainkit_core.plugins.provider import get_provider

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from trainkit_fake_models import make_fake_model

    volumes = trainkit_home / "volumes"
    model = make_fake_model(volumes / "trainkit-models", volumes / "trainkit-hf-cache")
    settings = settings_for(trainkit_home, TOKEN)
    app = create_app(settings, provider=get_provider("local", settings), answer_within_s=240)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.02)
    prompt = "snow blue " * 3000
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300
        ) as client:
            response = client.post("/v1/generate", json={"model_path": model, "prompt": prompt})
            assert response.status_code == 413, response.text[:500]
            assert "context of 1024 tokens" in error_of(response)["message"]
            response = client.post(
                "/v1/chat/completions", json={"model": model, "messages": [{"role": "user", "content": prompt}]}
            )
            # 413 when the job answers within the first keep-alive slice, else the error object in the started body
            error = response.json()["error"]
            assert error["type"] == "request_too_large" and "context of 1024 tokens" in error["message"], error
    finally:
        server.should_exit = True
        thread.join(timeout=15)
