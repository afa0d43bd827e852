"""Seed 000's `modal run … --action ping` (trainkit_modal.actions), against the offline fake Modal.

With `--model-size` the seed's ping reports the size's image and GPU and
whether HF_TOKEN is set; the action used to ignore the size and run the light `ping`.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings
from trainkit_modal.actions import run_action
from trainkit_modal.plugin import ModalPlugin


@pytest.fixture
def deployed(fake_modal: ModuleType) -> Provider:
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: fake_modal), name="modal", module="trainkit_modal.plugin")
    provider = get_provider("modal", Settings.from_env(), pm=pm)
    provider.deployment().deploy()
    return provider


def test_ping_with_a_model_size_runs_the_gpu_ping_of_that_size(
    deployed: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    result = run_action(deployed, "ping", model_size="tiny")
    assert result["model_size"] == "tiny"
    assert result["hf_token_set"] is False
    assert "cuda_available" in result


def test_ping_without_a_size_is_the_light_ping(deployed: Provider) -> None:
    result = run_action(deployed, "ping")
    assert result["ok"] is True and "cuda_available" not in result
