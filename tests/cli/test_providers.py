"""`trainkit providers` and the plugin switches, through the real console entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def trainkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainkit_cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def names(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [p["name"] for p in json.loads(done.stdout)]


def test_providers_json_describes_local(cli_env: dict[str, str]) -> None:
    done = trainkit("providers", "--json", env=cli_env)
    local = {p["name"]: p for p in json.loads(done.stdout)}["local"]
    assert local["package"] == "trainkit-core" and local["version"]
    assert {"kv_store", "provider_manifest", "provision", "run_function", "volume"} <= set(local["hooks"])
    assert local["capabilities"]["run_functions"] and local["capabilities"]["stop"]
    assert local["capabilities"]["gpu"] is False


def test_providers_table(cli_env: dict[str, str]) -> None:
    done = trainkit("providers", env={**cli_env, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "local" in done.stdout and "trainkit-core" in done.stdout and "durable_kv" in done.stdout


@pytest.mark.slow
def test_switches(cli_env: dict[str, str]) -> None:
    assert names(trainkit("providers", "--json", env={**cli_env, "TRAINKIT_LOAD_PLUGINS": "local"})) == ["local"]
    assert "local" not in names(trainkit("providers", "--json", env={**cli_env, "TRAINKIT_DISABLE_PLUGINS": "local"}))
    traced = trainkit("providers", "--json", env={**cli_env, "TRAINKIT_TRACE_PLUGINS": "1"})
    assert "trainkit: hook provider_manifest()" in traced.stderr
    assert "trainkit: hook" not in traced.stdout


@pytest.mark.slow
def test_a_plugin_that_fails_to_import_is_named(cli_env: dict[str, str], tmp_path: Path) -> None:
    """A throw-away distribution on PYTHONPATH whose plugin module raises on import."""
    (tmp_path / "tk_broken_plugin.py").write_text("raise RuntimeError('half-installed dependency')\n")
    dist_info = tmp_path / "tk_broken-0.0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: tk-broken\nVersion: 0.0.1\n")
    (dist_info / "entry_points.txt").write_text("[trainkit]\nbroken = tk_broken_plugin\n")
    env = {**cli_env, "PYTHONPATH": str(tmp_path)}
    done = trainkit("providers", env=env)
    assert done.returncode == 5
    assert 'error importing plugin "broken" (tk_broken_plugin): RuntimeError: half-installed dependency' in done.stderr
    assert "TRAINKIT_DISABLE_PLUGINS=broken" in done.stderr
    assert "Traceback" not in done.stderr
    # The switch the hint names works.
    assert "local" in names(trainkit("providers", "--json", env={**env, "TRAINKIT_DISABLE_PLUGINS": "broken"}))


@pytest.mark.slow
def test_unknown_provider_lists_the_installed_ones(cli_env: dict[str, str]) -> None:
    done = trainkit("--provider", "nosuch", "ping", env={**cli_env, "TRAINKIT_LOAD_PLUGINS": "local"})
    assert done.returncode == 3
    assert "unknown provider 'nosuch'; installed providers: local" in done.stderr
