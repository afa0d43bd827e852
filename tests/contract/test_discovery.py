"""A provider installed from its own distribution shows up like the built-in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.fixture(autouse=True, scope="module")
def _dirstore_installed() -> None:
    """Skip where the fixture plugin is not installed (only `plugin_discovery` installs it), unless required.

    A fixture, not a check at import: a session that collects this module and selects
    none of its tests (`ml`) must not count a skip.
    """
    if os.environ.get("TRAINKIT_REQUIRE_DIRSTORE") != "1":
        pytest.importorskip("trainkit_dirstore", reason="the trainkit-dirstore fixture plugin is not installed")


def providers_json(env: dict[str, str]) -> dict[str, dict]:
    out = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", "providers", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {p["name"]: p for p in json.loads(out)}


def test_providers_lists_local_and_the_fixture_plugin(cli_env: dict[str, str]) -> None:
    found = providers_json(cli_env)
    assert {"local", "dirstore"} <= set(found)
    dirstore = found["dirstore"]
    assert (dirstore["package"], dirstore["version"]) == ("trainkit-dirstore", "0.3.1")
    assert dirstore["module"] == "trainkit_dirstore"
    assert dirstore["hooks"] == ["kv_store", "provider_manifest", "volume"]
    caps = dirstore["capabilities"]
    assert caps["durable_volumes"] and caps["durable_kv"]
    assert not caps["run_functions"] and not caps["stop"]
    assert found["local"]["package"] == "trainkit-core"
    assert found["local"]["capabilities"]["run_functions"] is True


def test_load_plugins_switch_leaves_only_local(cli_env: dict[str, str]) -> None:
    assert set(providers_json({**cli_env, "TRAINKIT_LOAD_PLUGINS": "local"})) == {"local"}


def test_disable_plugins_switch_drops_the_fixture(cli_env: dict[str, str]) -> None:
    found = providers_json({**cli_env, "TRAINKIT_DISABLE_PLUGINS": "dirstore"})
    assert "dirstore" not in found and "local" in found
