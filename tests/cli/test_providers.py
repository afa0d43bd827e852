"""`trainkit providers` and the plugin switches, through the real console entry point."""

from __future__ import annotations

import json
import os
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


def fake_distribution(folder: Path, name: str, module_source: str) -> dict[str, str]:
    """A throw-away distribution on PYTHONPATH whose entry point `name` is the module `tk_<name>`."""
    (folder / f"tk_{name}.py").write_text(module_source)
    dist_info = folder / f"tk_{name}-0.0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tk-{name}\nVersion: 0.0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[trainkit]\n{name} = tk_{name}\n")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)}


@pytest.mark.slow
def test_a_plugin_that_fails_to_import_does_not_take_the_others_down(cli_env: dict[str, str], tmp_path: Path) -> None:
    env = {**cli_env, **fake_distribution(tmp_path, "broken", "raise RuntimeError('half-installed dependency')\n")}
    done = trainkit("providers", "--json", env=env)
    assert done.returncode == 0, done.stderr
    listed = {p["name"]: p for p in json.loads(done.stdout)}
    assert listed["local"]["state"] == "ok"
    assert listed["broken"]["state"] == "broken" and listed["broken"]["package"] == "tk-broken"
    assert (
        'error importing plugin "broken" (tk_broken): RuntimeError: half-installed dependency'
        in (listed["broken"]["error"])
    )
    table = trainkit("providers", env={**env, "COLUMNS": "300"})
    assert table.returncode == 0 and "half-installed dependency" in table.stdout
    # Other providers keep working; the one that is broken fails with its error and the way out.
    assert trainkit("ping", env=env).returncode == 0
    needed = trainkit("--provider", "broken", "ping", env=env)
    assert needed.returncode == 5
    assert "RuntimeError: half-installed dependency" in needed.stderr
    assert "TRAINKIT_DISABLE_PLUGINS=broken" in needed.stderr and "Traceback" not in needed.stderr
    debug = trainkit("--provider", "broken", "ping", env={**env, "TRAINKIT_DEBUG": "1"})
    assert "Traceback (most recent call last)" in debug.stderr and 'tk_broken.py", line 1' in debug.stderr
    # The switch the hint names works, and the provider is then reported as disabled.
    disabled = {**env, "TRAINKIT_DISABLE_PLUGINS": "broken"}
    assert "broken" not in names(trainkit("providers", "--json", env=disabled))
    refused = trainkit("--provider", "broken", "ping", env=disabled)
    assert "'broken' is installed but disabled by TRAINKIT_DISABLE_PLUGINS" in refused.stderr


def test_a_misspelt_hook_is_named_with_the_right_one(cli_env: dict[str, str], tmp_path: Path) -> None:
    source = (
        "from trainkit_core.plugins.hookspecs import hookimpl\n"
        "@hookimpl\n"
        "def kv_stroe(provider, settings, namespace):\n"
        "    return None\n"
    )
    env = {**cli_env, **fake_distribution(tmp_path, "typo", source)}
    listed = {p["name"]: p for p in json.loads(trainkit("providers", "--json", env=env).stdout)}
    assert "unknown hook 'kv_stroe' (did you mean 'kv_store'?)" in listed["typo"]["error"]
    assert listed["local"]["state"] == "ok"


@pytest.mark.slow
def test_unknown_provider_lists_the_installed_ones(cli_env: dict[str, str]) -> None:
    done = trainkit("--provider", "nosuch", "ping", env={**cli_env, "TRAINKIT_LOAD_PLUGINS": "local"})
    assert done.returncode == 3
    assert "unknown provider 'nosuch'; installed providers: local" in done.stderr
