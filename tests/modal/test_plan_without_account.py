"""A plan of a Modal run needs no Modal account and no network.

The CLI runs as a user runs it, in a subprocess from a folder outside the clone, with
the Modal environment of `conftest.py` (no token, a server address that refuses
connections): the plan comes from the local dataset, the presets and the price table,
and says that the store of earlier runs was not reachable.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PLAN = ("--provider", "modal", "train", "--dataset", "demo", "--model-size", "4b", "--plan")


def plan(cwd: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainkit_cli", *PLAN, *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def plan_env(cli_env: dict[str, str]) -> dict[str, str]:
    """No datasets folder: the demo dataset ships inside trainkit-core."""
    return {k: v for k, v in cli_env.items() if k != "TRAINKIT_DATASETS_DIR"}


@pytest.mark.slow
def test_plan_without_a_token_prices_the_run(plan_env: dict[str, str], tmp_path: Path) -> None:
    done = plan(tmp_path, plan_env, "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["provider"] == "modal" and shown["gpu"] == "A10G" and shown["model"] == "google/gemma-3-4b-it"
    assert shown["estimated_seconds"] > 0 and shown["estimated_cost_usd"] > 0 and shown["usd_per_hour"] > 0
    assert shown["throughput_source"].startswith("throughput table")
    [note] = [n for n in shown["notes"] if "store" in n]
    assert "modal store is not reachable" in note and "no valid Modal token" in note

    done = plan(tmp_path, plan_env)  # as people read it
    assert done.returncode == 0, done.stderr
    assert "plan: google/gemma-3-4b-it on modal (A10G), dataset demo" in done.stdout
    assert "estimated cost $" in done.stdout and "note: the modal store is not reachable" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_plan_with_a_token_modal_cannot_check_waits_a_bounded_time(plan_env: dict[str, str], tmp_path: Path) -> None:
    """A token and no answer from Modal: the client retries for about a minute; the plan goes on without it."""
    env = {**plan_env, "MODAL_TOKEN_ID": "ak-not-a-real-token", "MODAL_TOKEN_SECRET": "as-not-a-real-secret"}
    done = plan(tmp_path, env, "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["estimated_cost_usd"] > 0
    assert any("modal store did not answer within" in n for n in shown["notes"]), shown["notes"]
    assert "Traceback" not in done.stderr and "as-not-a-real-secret" not in done.stdout + done.stderr


@pytest.mark.slow
def test_plan_for_two_gpus_prints_the_global_batch_and_costs_twice(plan_env: dict[str, str], tmp_path: Path) -> None:
    """Per-device batch x accumulation x world size, cost x N, time at a stated scaling."""
    one = json.loads(plan(tmp_path, plan_env, "--json", "--steps", "20").stdout)
    done = plan(tmp_path, plan_env, "--json", "--steps", "20", "--gpus", "2")
    assert done.returncode == 0, done.stderr
    two = json.loads(done.stdout)
    assert two["gpu"] == "A10G:2" and two["gpus"] == 2 and two["world_size"] == 2
    assert two["global_batch"] == two["per_device_batch"] * two["grad_accum"] * 2 == 2 * one["global_batch"]
    assert "scaling efficiency (assumption)" in two["throughput_source"]
    assert two["tokens_per_s"] == pytest.approx(one["tokens_per_s"] * 2 * 0.9)
    assert two["strategy"].startswith("ddp on 2 ranks")
    assert two["estimated_cost_usd"] == pytest.approx(
        two["estimated_seconds"] / 3600 * 2 * two["usd_per_hour"], rel=1e-3
    )
    text = plan(tmp_path, plan_env, "--steps", "20", "--gpus", "2").stdout
    assert f"global batch {two['global_batch']} = per-device batch {two['per_device_batch']} x accumulation" in text
    # The same model in bf16 (--no-4bit) takes over half of each GPU: auto shards it, and says why.
    done = plan(tmp_path, plan_env, "--json", "--steps", "20", "--model-size", "31b", "--gpus", "2", "--no-4bit")
    assert done.returncode == 0, done.stderr
    sharded = json.loads(done.stdout)
    assert sharded["strategy"].startswith(
        "fsdp on 2 ranks (its weights (61.4 GB in bf16) take over half of one A100-80GB"
    )
    assert "backend hf" in sharded["strategy"]


@pytest.mark.slow
def test_plan_of_a_mixture_of_experts_says_what_lora_trains(plan_env: dict[str, str], tmp_path: Path) -> None:
    done = plan(tmp_path, plan_env, "--json", "--steps", "20", "--model-size", "26b-a4b")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["gpu"] == "A100-80GB" and shown["model"] == "google/gemma-4-26B-A4B-it"
    assert any("its 128 experts stay as they are" in n for n in shown["notes"]), shown["notes"]


@pytest.mark.slow
def test_plan_for_two_nodes_of_eight_gpus_counts_sixteen(plan_env: dict[str, str], tmp_path: Path) -> None:
    done = plan(tmp_path, plan_env, "--json", "--steps", "20", "--model-size", "12b", "--gpus", "8", "--nodes", "2")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["gpu"] == "A100-40GB:8" and shown["gpus"] == 8 and shown["world_size"] == 16
    assert shown["estimated_cost_usd"] == pytest.approx(
        shown["estimated_seconds"] / 3600 * 16 * shown["usd_per_hour"], rel=1e-3
    )
