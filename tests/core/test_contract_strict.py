"""The conformance suite fails a provider that only looks right.

A provider whose `cancel` marks the call cancelled but leaves its process running
passed the suite once; the suite now watches the job's heartbeat, and this test
holds it to that by running the check against such a provider.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from trainkit_core.local.plugin import home_of
from trainkit_core.local.runner import LocalRunner
from trainkit_core.plugins.hookspecs import Capabilities, ProviderManifest, hookimpl
from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings
from trainkit_core.testing import ProviderContract
from trainkit_core.toolkit.detached import DetachedRunHandle
from trainkit_core.toolkit.processes import alive, signal_group
from trainkit_core.toolkit.sqlite_kv import LocalKV


class RecordOnlyCancel(DetachedRunHandle):
    """Writes "cancelled" on the record and leaves the job's process running."""

    def cancel(self, grace_s: float = 0) -> None:
        if self.record()["state"] in ("pending", "running"):
            self._calls.put(f"{self.call_id}/cancel", time.time())
            self._calls.put_if_absent(f"{self.call_id}/end", {"state": "cancelled", "ended_at": time.time()})


class LazyRunner(LocalRunner):
    handle_class = RecordOnlyCancel


class LazyPlugin:
    """The local provider's store and processes, with the record-only cancel."""

    @hookimpl
    def provider_manifest(self) -> ProviderManifest:
        return ProviderManifest("lazy", Capabilities(stop=True, run_functions=True, durable_kv=True))

    @hookimpl
    def kv_store(self, provider: str, settings: Settings, namespace: str) -> Any:
        return LocalKV(home_of(settings), namespace) if provider == "lazy" else None

    @hookimpl
    def run_function(self, provider: str, settings: Settings) -> Any:
        return LazyRunner(home_of(settings), settings) if provider == "lazy" else None


class LazyContract(ProviderContract):
    provider_name = "lazy"
    other_processes = False

    def make_provider(self, settings: Settings) -> Provider:
        pm = build_plugin_manager(load_entry_points=False)
        register(pm, LazyPlugin(), name="lazy")
        return get_provider("lazy", settings, pm=pm)


def test_the_suite_fails_a_cancel_that_leaves_the_process_running(trainkit_home) -> None:
    settings = Settings.from_env()
    provider = LazyContract().make_provider(settings)
    try:
        with pytest.raises(AssertionError, match="still running after cancel: its heartbeat went on"):
            LazyContract().test_run_cancel_ends_what_the_job_runs(provider)
    finally:
        # The lazy cancel left the job running: end it for real.
        for key, proc in LocalKV(trainkit_home, "_calls").items():
            if key.endswith("/proc") and alive(proc.get("supervisor_pid"), proc.get("supervisor_start")):
                signal_group(proc["supervisor_pid"], signal.SIGKILL)
