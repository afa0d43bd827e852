"""The plugin manager: registration, validation, switches, tracing and the provider facade."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from trainkit_core import get_provider, list_providers
from trainkit_core.errors import NotFoundError, PluginLoadError, ProviderError
from trainkit_core.hookspecs import Capabilities, ProviderManifest, hookimpl
from trainkit_core.local.kv import LocalKV
from trainkit_core.plugins import build_plugin_manager, check_pending, plugin_info, register
from trainkit_core.settings import Settings


class FakeProvider:
    """A provider that answers for its own name only, as every plugin must."""

    def __init__(self, name: str, answer: Any) -> None:
        self.name = name
        self.answer = answer

    @hookimpl
    def provider_manifest(self) -> ProviderManifest:
        return ProviderManifest(self.name, Capabilities(stop=True), "a fake")

    @hookimpl
    def kv_store(self, provider: str, namespace: str) -> Any:
        # Fewer arguments than the spec: allowed, that is how specs grow.
        return self.answer if provider == self.name else None


@pytest.fixture
def pm():
    return build_plugin_manager(load_entry_points=False)


def test_facade_routes_each_provider_to_its_own_plugin(pm) -> None:
    register(pm, FakeProvider("alpha", "kv of alpha"), name="alpha")
    register(pm, FakeProvider("beta", "kv of beta"), name="beta")
    settings = Settings.from_env()
    assert get_provider("alpha", settings, pm=pm).kv("x") == "kv of alpha"
    assert get_provider("beta", settings, pm=pm).kv("x") == "kv of beta"
    assert [p.name for p in list_providers(pm)] == ["alpha", "beta"]
    assert list_providers(pm)[0].plugin is not None
    assert plugin_info(pm)["alpha"].hooks == ("kv_store", "provider_manifest")


def test_missing_hook_is_a_provider_error(pm) -> None:
    register(pm, FakeProvider("alpha", "kv"), name="alpha")
    provider = get_provider("alpha", Settings.from_env(), pm=pm)
    with pytest.raises(ProviderError, match="does not implement the 'volume' hook"):
        provider.volume("data")


def test_unknown_provider_lists_installed_ones(pm) -> None:
    register(pm, FakeProvider("alpha", "kv"), name="alpha")
    register(pm, FakeProvider("beta", "kv"), name="beta")
    with pytest.raises(NotFoundError, match="unknown provider 'gamma'; installed providers: alpha, beta"):
        get_provider("gamma", Settings.from_env(), pm=pm)


def test_check_pending_catches_a_misspelt_hook(pm) -> None:
    class Misspelt:
        @hookimpl
        def kv_stor(self, provider: str) -> None:
            return None

    register(pm, Misspelt(), name="misspelt")
    with pytest.raises(PluginLoadError, match=r'(?s)plugin "misspelt" is invalid.*kv_stor'):
        check_pending(pm)


def test_an_argument_the_spec_lacks_names_the_plugin(pm) -> None:
    class WrongArgs:
        @hookimpl
        def volume(self, provider: str, colour: str) -> None:
            return None

    with pytest.raises(PluginLoadError, match=r'(?s)plugin "wrong-args" is invalid.*colour'):
        register(pm, WrongArgs(), name="wrong-args")


def test_a_manifest_of_the_wrong_type_is_refused(pm) -> None:
    class Sloppy:
        @hookimpl
        def provider_manifest(self) -> Any:
            return {"name": "sloppy"}

    register(pm, Sloppy(), name="sloppy")
    with pytest.raises(ProviderError, match="'sloppy' answered provider_manifest with dict"):
        list_providers(pm)


def test_local_is_loaded_from_its_entry_point() -> None:
    pm = build_plugin_manager()
    info = plugin_info(pm)["local"]
    assert (info.module, info.package) == ("trainkit_core.local.plugin", "trainkit-core")
    assert info.version
    assert isinstance(get_provider("local", pm=pm).kv("x"), LocalKV)


def test_load_plugins_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_LOAD_PLUGINS", "local")
    assert [p.name for p in list_providers(build_plugin_manager())] == ["local"]
    monkeypatch.setenv("TRAINKIT_LOAD_PLUGINS", "")
    with pytest.raises(NotFoundError, match="installed providers: none"):
        get_provider("local", pm=build_plugin_manager())


def test_disable_plugins_deny_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_DISABLE_PLUGINS", "local, other")
    assert "local" not in [p.name for p in list_providers(build_plugin_manager())]


@pytest.mark.slow
def test_trace_prints_hook_calls_without_secrets(cli_env: dict[str, str]) -> None:
    code = "from trainkit_core import get_provider; get_provider('local').kv('runs').put('k', 1)"
    env = {
        **cli_env,
        "TRAINKIT_TRACE_PLUGINS": "1",
        "TRAINKIT_API_TOKEN": "tok-very-secret",
        "TRAINKIT_LOAD_PLUGINS": "local",
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "trainkit: hook provider_manifest()" in done.stderr
    assert "trainkit: hook kv_store(provider='local', settings, namespace='runs')" in done.stderr
    assert "trainkit: hook kv_store -> LocalKV" in done.stderr
    assert "tok-very-secret" not in done.stderr
    quiet = subprocess.run(
        [sys.executable, "-c", code], env={**env, "TRAINKIT_TRACE_PLUGINS": "0"}, capture_output=True, text=True
    )
    assert "trainkit: hook" not in quiet.stderr
