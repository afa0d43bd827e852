"""The plugin manager: registration, validation, switches, tracing and the provider facade."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from trainkit_core import get_provider, list_providers
from trainkit_core.errors import NotFoundError, PluginLoadError, ProviderError, UsageError
from trainkit_core.plugins.hookspecs import Capabilities, ProviderManifest, hookimpl
from trainkit_core.plugins.manager import build_plugin_manager, check_pending, plugin_info, register
from trainkit_core.settings import Settings, settings_table
from trainkit_core.toolkit.sqlite_kv import LocalKV


class DictKV:
    """The smallest object that follows the KVStore protocol (the facade checks answers)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.data: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value

    def put_if_absent(self, key: str, value: Any) -> bool:
        return self.data.setdefault(key, value) is value

    def delete(self, key: str) -> bool:
        return self.data.pop(key, None) is not None

    def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self.data if k.startswith(prefix))

    def items(self, prefix: str = "") -> list[tuple[str, Any]]:
        return [(k, self.data[k]) for k in self.keys(prefix)]


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
    register(pm, FakeProvider("alpha", DictKV("of alpha")), name="alpha")
    register(pm, FakeProvider("beta", DictKV("of beta")), name="beta")
    settings = Settings.from_env()
    assert get_provider("alpha", settings, pm=pm).kv("x").namespace == "of alpha"
    assert get_provider("beta", settings, pm=pm).kv("x").namespace == "of beta"
    assert [p.name for p in list_providers(pm)] == ["alpha", "beta"]
    assert list_providers(pm)[0].plugin is not None
    assert plugin_info(pm)["alpha"].hooks == ("kv_store", "provider_manifest")


def test_missing_hook_is_a_provider_error(pm) -> None:
    register(pm, FakeProvider("alpha", DictKV("kv")), name="alpha")
    provider = get_provider("alpha", Settings.from_env(), pm=pm)
    with pytest.raises(ProviderError, match="does not implement the 'volume' hook"):
        provider.volume("data")


def test_an_answer_of_the_wrong_type_names_the_plugin_and_the_hook(pm) -> None:
    register(pm, FakeProvider("alpha", "not a store"), name="alpha-plugin")
    with pytest.raises(ProviderError) as caught:
        get_provider("alpha", Settings.from_env(), pm=pm).kv("runs")
    message = caught.value.message
    assert "plugin 'alpha-plugin' answered the 'kv_store' hook for provider 'alpha' with str" in message
    assert "not a KVStore (it lacks namespace, get, put, put_if_absent" in message


def test_none_for_its_own_provider_is_not_reported_as_missing(pm) -> None:
    register(pm, FakeProvider("alpha", None), name="alpha")
    with pytest.raises(ProviderError, match="'alpha' answered None to the 'kv_store' hook for its own provider"):
        get_provider("alpha", Settings.from_env(), pm=pm).kv("runs")


def test_an_exception_in_a_hook_names_the_plugin(pm) -> None:
    class Crashing(FakeProvider):
        @hookimpl
        def kv_store(self, provider: str, namespace: str) -> Any:
            return {}["missing"]

    register(pm, Crashing("alpha", None), name="crashing")
    with pytest.raises(ProviderError, match=r"plugin 'crashing' failed in the 'kv_store' hook .*KeyError"):
        get_provider("alpha", Settings.from_env(), pm=pm).kv("runs")


def test_unknown_provider_lists_installed_ones(pm) -> None:
    register(pm, FakeProvider("alpha", DictKV("kv")), name="alpha")
    register(pm, FakeProvider("beta", DictKV("kv")), name="beta")
    with pytest.raises(NotFoundError, match="unknown provider 'gamma'; installed providers: alpha, beta"):
        get_provider("gamma", Settings.from_env(), pm=pm)


def test_a_misspelt_hook_is_refused_with_the_right_name(pm) -> None:
    class Misspelt:
        @hookimpl
        def kv_stor(self, provider: str) -> None:
            return None

    with pytest.raises(
        PluginLoadError, match=r"plugin \"misspelt\" is invalid: unknown hook 'kv_stor' \(did you mean 'kv_store'\?\)"
    ):
        register(pm, Misspelt(), name="misspelt")
    assert pm.get_plugin("misspelt") is None  # not left half-registered
    check_pending(pm)  # nothing pending: the others keep working


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
    register(pm, FakeProvider("alpha", DictKV("kv")), name="alpha")
    listed = {p.name: p for p in list_providers(pm)}
    assert "'sloppy' answered provider_manifest with dict" in listed["sloppy"].error
    assert listed["sloppy"].as_dict()["state"] == "broken" and listed["alpha"].error == ""
    with pytest.raises(PluginLoadError, match="'sloppy' answered provider_manifest with dict"):
        get_provider("sloppy", Settings.from_env(), pm=pm)
    assert get_provider("alpha", Settings.from_env(), pm=pm).kv("x").namespace == "kv"


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
    with pytest.raises(UsageError, match="'local' is installed but disabled by TRAINKIT_LOAD_PLUGINS"):
        get_provider("local", pm=build_plugin_manager())


def test_a_disabled_provider_is_reported_as_disabled(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv("TRAINKIT_DISABLE_PLUGINS", "local, lcoal")
    pm = build_plugin_manager()
    assert "local" not in [p.name for p in list_providers(pm)]
    with pytest.raises(UsageError, match="'local' is installed but disabled by TRAINKIT_DISABLE_PLUGINS") as caught:
        get_provider("local", pm=pm)
    assert caught.value.hint == "remove it from TRAINKIT_DISABLE_PLUGINS to use it"
    # A name that matches no installed plugin is warned about, with the closest one.
    assert "TRAINKIT_DISABLE_PLUGINS names 'lcoal', which no installed plugin is (did you mean 'local'?)" in caplog.text


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
    assert "trainkit: hook kv_store -> LocalKV from plugin 'local'" in done.stderr
    assert "tok-very-secret" not in done.stderr
    quiet = subprocess.run(
        [sys.executable, "-c", code], env={**env, "TRAINKIT_TRACE_PLUGINS": "0"}, capture_output=True, text=True
    )
    assert "trainkit: hook" not in quiet.stderr


class ColourSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TRAINKIT_COLOUR_", extra="ignore")

    shade: str = Field(default="blue", description="The colour of the fake provider.")


class ColourProvider(FakeProvider):
    """A plugin with settings of its own, registered through its `trainkit_settings` attribute."""

    trainkit_settings = ColourSettings

    @hookimpl
    def kv_store(self, provider: str, settings: Settings, namespace: str) -> Any:
        return DictKV(settings.plugin(ColourSettings).shade) if provider == self.name else None


def test_plugin_settings_are_read_listed_and_passed_on(pm, monkeypatch: pytest.MonkeyPatch) -> None:
    register(pm, ColourProvider("colour", None), name="colour")
    monkeypatch.setenv("TRAINKIT_COLOUR_SHADE", "green")
    provider = get_provider("colour", Settings.from_env(), pm=pm)
    assert provider.kv("x").namespace == "green"
    assert provider.settings.to_env()["TRAINKIT_COLOUR_SHADE"] == "green"  # what job processes get
    [listed] = list_providers(pm)
    assert listed.as_dict()["settings"] == [
        {"variable": "TRAINKIT_COLOUR_SHADE", "default": "blue", "meaning": "The colour of the fake provider."}
    ]
    assert ("TRAINKIT_COLOUR_SHADE", "blue", "The colour of the fake provider.") in settings_table((ColourSettings,))
