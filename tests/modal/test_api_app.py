"""The app's lifecycle through the web API (`/v1/app`), on the modal provider over the SDK fake."""

from __future__ import annotations

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
