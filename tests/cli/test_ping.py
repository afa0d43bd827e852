"""`trainkit ping` runs the ping job on the provider and never shows a secret."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def ping(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainkit_cli", "ping", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_ping_json(cli_env: dict[str, str], trainkit_home: Path) -> None:
    env = {**cli_env, "HF_TOKEN": "hf_secret_value_123"}
    done = ping(env, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["provider"] == "local" and result["ok"] is True
    assert result["call_id"].startswith("lc-")
    assert result["hf_token_set"] is True
    assert set(result["volumes"]) == {"data", "models", "eval", "hf-cache"}
    assert all(v["exists"] for v in result["volumes"].values())
    assert result["volumes"]["models"]["path"] == str(trainkit_home / "volumes" / "trainkit-models")
    assert "hf_secret_value_123" not in done.stdout + done.stderr


@pytest.mark.slow
def test_ping_text(cli_env: dict[str, str]) -> None:
    env = {k: v for k, v in cli_env.items() if k != "HF_TOKEN"}
    done = ping(env)
    assert done.returncode == 0, done.stderr
    assert "local ok" in done.stdout
    assert "HF_TOKEN  not set" in done.stdout
    assert "gpu       none" in done.stdout


@pytest.mark.slow
def test_gpu_ping_on_the_local_provider_says_there_is_no_cuda(cli_env: dict[str, str]) -> None:
    """`--model-size` runs the GPU check; locally it runs on this machine, which has no CUDA here."""
    env = {**cli_env, "HF_TOKEN": "hf_secret_value_123"}
    done = ping(env, "--model-size", "4b", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["provider"] == "local" and result["model_size"] == "4b"
    assert result["gpu"] is None and result["cuda_available"] is False
    assert result["hf_token_set"] is True and "hf_secret_value_123" not in done.stdout + done.stderr
    if result["torch"] is None:  # the torch-free sessions
        assert result["packages"] == {"torch": {"ok": False, "error": "not installed"}}
    else:
        assert set(result["packages"]) == {"bitsandbytes", "unsloth"}

    done = ping(env, "--model-size", "4b")
    assert done.returncode == 0, done.stderr
    assert "model size 4b" in done.stdout and "gpu          none (no CUDA device)" in done.stdout
    assert "HF_TOKEN     set" in done.stdout
