"""The app's lifecycle through the web API (`/v1/app`), on the modal provider over the SDK fake."""

from __future__ import annotations

import json
import time
from types import ModuleType

import pytest

from trainkit_core.plugins import build_plugin_manager, register
from trainkit_core.provider import get_provider
from trainkit_core.settings import Settings
from trainkit_modal.plugin import ModalPlugin

pytest.importorskip("trainkit_api")


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

    monkeypatch.setenv("TRAINKIT_API_TOKEN", "gen-token")
    monkeypatch.setenv("FAKE_MODAL_INFER_FAULTS", json.dumps({"*": fault}))
    monkeypatch.setenv("TRAINKIT_HF_SECRET", "huggingface")  # the 4b hardware's gated base model
    fake_modal.create_secret("huggingface", ["HF_TOKEN"])
    settings = Settings.from_env()
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: fake_modal), name="modal", module="trainkit_modal.plugin")
    provider = get_provider("modal", settings, pm=pm)
    provider.deployment().deploy()
    model = "trained/run-20261130-120000-abcdef"
    models = provider.volume("models")
    for name, data in (
        ("adapter_config.json", b"{}"),
        ("adapter_model.safetensors", b"x"),
        ("trained_model.json", b"{}"),
    ):
        models.write_bytes(f"{model}/{name}", data)
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
