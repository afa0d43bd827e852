"""The app's lifecycle through the web API (`/v1/app`), on the modal provider over the SDK fake."""

from __future__ import annotations

import json
import threading
import time
from types import ModuleType
from typing import Any

import pytest

from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import get_provider
from trainkit_core.settings import Settings
from trainkit_modal.plugin import ModalPlugin

pytest.importorskip("trainkit_api")


MODEL = "trained/run-20261130-120000-abcdef"


def _deployed_provider(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, infer_faults: dict[str, str]) -> Any:
    """The modal provider over the SDK fake, the app deployed, one trained model on its volume."""
    monkeypatch.setenv("TRAINKIT_API_TOKEN", "gen-token")
    monkeypatch.setenv("FAKE_MODAL_INFER_FAULTS", json.dumps(infer_faults))
    monkeypatch.setenv("TRAINKIT_HF_SECRET", "huggingface")  # the 4b hardware's gated base model
    fake_modal.create_secret("huggingface", ["HF_TOKEN"])
    settings = Settings.from_env()
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: fake_modal), name="modal", module="trainkit_modal.plugin")
    provider = get_provider("modal", settings, pm=pm)
    provider.deployment().deploy()
    models = provider.volume("models")
    for name, data in (
        ("adapter_config.json", b"{}"),
        ("adapter_model.safetensors", b"x"),
        ("trained_model.json", b"{}"),
    ):
        models.write_bytes(f"{MODEL}/{name}", data)
    return settings, provider


def test_status_deploy_stop_behind_the_token(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from trainkit_api.app import create_app

    monkeypatch.setenv("TRAINKIT_API_TOKEN", "app-token")
    settings = Settings.from_env()
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: fake_modal), name="modal", module="trainkit_modal.plugin")
    auth = {"Authorization": "Bearer app-token"}
    with TestClient(create_app(settings, provider=get_provider("modal", settings, pm=pm))) as client:
        assert client.get("/v1/app").status_code == 401
        assert client.post("/v1/app/deploy").status_code == 401
        before = client.get("/v1/app", headers=auth).json()
        assert before["provider"] == "modal" and before["state"] == "not-deployed"

        deployed = client.post("/v1/app/deploy", headers=auth).json()
        assert deployed["state"] == "deployed" and deployed["detail"]["missing"] == []
        assert deployed["url"].startswith("https://")
        assert "app-token" not in str(deployed)

        stopped = client.post("/v1/app/stop", headers=auth).json()
        assert stopped["state"] == "stopped" and stopped["detail"]["app_id"] == deployed["detail"]["app_id"]
        assert client.get("/v1/app", headers=auth).json()["state"] == "stopped"

        again = client.post("/v1/app/stop", headers=auth)
        assert again.status_code == 404 and "not deployed" in again.json()["error"]["message"]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "within_s"), [("slow", 1.0), ("answer", 60.0)])
def test_a_generation_longer_than_the_web_limit_is_answered_202_then_fetched(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, fault: str, within_s: float
) -> None:
    """Modal cuts a web request off at 150 s: a generation not done in time is answered 202 and fetched later."""
    from fastapi.testclient import TestClient

    from trainkit_api.app import create_app

    settings, provider = _deployed_provider(fake_modal, monkeypatch, {"*": fault})
    model = MODEL
    auth = {"Authorization": "Bearer gen-token"}
    app = create_app(settings, provider=provider, answer_within_s=within_s)
    with TestClient(app) as client:
        answer = client.post("/v1/generate", json={"model_path": model, "prompt": "hi"}, headers=auth)
        if fault == "answer":  # done within the limit: the answer at once
            assert answer.status_code == 200 and answer.json()["text"] == "answered in attempt 1", answer.text
            return
        assert answer.status_code == 202, answer.text
        pending = answer.json()
        assert pending["status"] == "pending" and answer.headers["location"] == f"/v1/generate/{pending['id']}"
        deadline = time.monotonic() + 60
        while answer.status_code == 202:
            assert time.monotonic() < deadline
            answer = client.get(answer.headers["location"], headers=auth)
        assert answer.status_code == 200 and answer.json()["text"] == "answered in attempt 1", answer.text
        assert client.get(answer.request.url.path, headers={}).status_code == 401  # behind the token


CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}


def _chat_server(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, infer_faults: dict[str, str], within_s: float
) -> Any:
    """The deployed app's API (web limit `within_s`) served by uvicorn on 127.0.0.1."""
    import uvicorn

    from trainkit_api.app import create_app

    settings, provider = _deployed_provider(fake_modal, monkeypatch, infer_faults)
    app = create_app(settings, provider=provider, answer_within_s=within_s)
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the API server did not start"
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "within_s"), [("answer", 60.0), ("raise", 60.0), ("slow", 1.0), ("slow-raise", 1.0)])
def test_a_chat_completion_longer_than_the_web_limit_stays_openai_compatible(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, fault: str, within_s: float
) -> None:
    """Not done within the limit: 200 and JSON at once, spaces while it runs, then the completion or the error."""
    import httpx

    server, thread, url = _chat_server(fake_modal, monkeypatch, {"*": fault}, within_s)
    auth = {"Authorization": "Bearer gen-token"}
    try:
        with httpx.Client(base_url=url, headers=auth, timeout=60) as client:
            started = time.monotonic()
            with client.stream("POST", "/v1/chat/completions", json=CHAT) as answer:
                headers_after = time.monotonic() - started
                body = answer.read().decode()
            unknown = client.post("/v1/chat/completions", json={**CHAT, "model": "trained/run-20261130-120000-000000"})
    finally:
        server.should_exit = True
        thread.join(timeout=15)
    # An error known before the wait keeps its status and OpenAI's error object.
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error", unknown.text
    assert answer.headers["content-type"] == "application/json"
    if fault == "raise":  # failed within the limit: the job's refusal keeps its own status, no keep-alive
        assert answer.status_code == 404 and "no trained model" in json.loads(body)["error"]["message"], body
        assert json.loads(body)["error"]["type"] == "not_found_error", body
        return
    assert answer.status_code == 200, body
    parsed = json.loads(body)
    if fault == "answer":  # back within the limit: a plain JSON answer
        assert body.startswith("{") and "content-length" in answer.headers
    else:  # the 3 s model load: the response started within the 1 s limit and kept alive with spaces
        assert headers_after < 2.5, headers_after
        assert body.startswith("  ") and body.strip() == body.lstrip(), body[:80]
    if fault == "slow-raise":  # the error after the response started: the body is OpenAI's error object
        assert parsed["error"]["type"] == "not_found_error" and "no trained model" in parsed["error"]["message"], body
        return
    assert parsed["object"] == "chat.completion" and parsed["model"] == MODEL
    assert parsed["choices"][0]["message"] == {"role": "assistant", "content": "answered in attempt 1"}


# `ml`: the session that installs the `openai` client (the ml-test group), where a
# missing client is a failure rather than a skip; nothing here needs torch.
@pytest.mark.ml
@pytest.mark.parametrize("fault", ["slow", "slow-raise"])
def test_the_openai_client_reads_a_kept_alive_completion(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The official client parses the completion behind the keep-alive spaces, and a late error's object."""
    import openai

    server, thread, url = _chat_server(fake_modal, monkeypatch, {"*": fault}, 1.0)
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="gen-token", max_retries=0, timeout=60)
        started = time.monotonic()
        reply = client.chat.completions.create(model=CHAT["model"], messages=CHAT["messages"])
        waited = time.monotonic() - started
    finally:
        server.should_exit = True
        thread.join(timeout=15)
    assert waited > 1.0  # it did wait past the limit
    if fault == "slow-raise":  # status 200: the client raises nothing; the error object is the reply's `error`
        assert reply.model_extra is not None and reply.choices is None
        assert reply.model_extra["error"]["type"] == "not_found_error" and "no trained model" in str(reply.model_extra)
        return
    assert reply.choices[0].message.content == "answered in attempt 1" and reply.model == MODEL
