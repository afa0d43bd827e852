"""The provider conformance suite of core, run against the modal provider's hook objects.

The hooks are the real ones (`trainkit_modal.plugin.ModalPlugin`); only the SDK
under them is the fake of `fake_modal.py` (Dict, Volume with batch_upload, App,
Function / FunctionCall / Cls), whose state lives in a folder. A second process
(the suite's durability checks) gets the same fake through `fake_sdk/modal.py` put
first on its PYTHONPATH, so those checks run too, on Python 3.11 (the matrix's
reference Python): they start a dozen processes, and the provider's code does not
change with the Python version. The app is deployed (to the fake) before each test,
as `trainkit app deploy` would.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("trainkit_core.testing")

from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings
from trainkit_core.testing import ProviderContract
from trainkit_modal.plugin import ModalPlugin

FAKE_SDK_DIR = Path(__file__).resolve().parent / "fake_sdk"


class TestModalProviderOnFakes(ProviderContract):
    provider_name = "modal"
    large_file_mb = 16
    other_processes = sys.version_info[:2] == (3, 11)

    @pytest.fixture(autouse=True)
    def _fake_root(self, fake_modal: ModuleType) -> ModuleType:
        self.fake = fake_modal
        return fake_modal

    def make_provider(self, settings: Settings) -> Provider:
        pm = build_plugin_manager(load_entry_points=False)
        register(pm, ModalPlugin(lambda: self.fake), name="modal", module="trainkit_modal.plugin")
        provider = get_provider("modal", settings, pm=pm)
        provider.deployment().deploy()
        return provider

    def child_env(self, settings: Settings) -> dict[str, str]:
        env = super().child_env(settings)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKE_SDK_DIR), env.get("PYTHONPATH", "")) if p)
        return env
