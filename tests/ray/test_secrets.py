"""Secrets reach a job on the cluster, and never Ray's listings of actors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ray_helpers import RayEnv, wait_for


def test_the_hf_token_reaches_the_job_but_not_the_actor_listing(
    tmp_path_factory: pytest.TempPathFactory, ray_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "hf_secret_value_that_must_not_leak_4242"
    env = RayEnv(tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("datasets"), ray_cluster.address)
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("TRAINKIT_API_TOKEN", "api-token-that-stays-with-the-client")
    provider = env.provider()
    handle = provider.spawn("sleep", seconds=30, until_file=str(env.home / "done"), say="running")
    wait_for(lambda: handle.status().state == "running", 60, "the running call")
    # While the job runs: its secrets file is its owner's only, and nothing Ray lists holds the token.
    secrets = env.storage / "secrets" / f"{handle.call_id}.json"
    assert secrets.stat().st_mode & 0o077 == 0
    assert set(json.loads(secrets.read_text())) == {"HF_TOKEN"}, "only the job's secrets travel (not the API token)"
    from ray.util.state import list_actors, list_tasks

    actors = [
        a for a in list_actors(address=ray_cluster.address, detail=True, limit=10_000) if a.name == handle.call_id
    ]
    assert actors, "the job's actor is not listed"
    listed = json.dumps([a.__dict__ for a in actors], default=str) + json.dumps(
        [t.__dict__ for t in list_tasks(address=ray_cluster.address, detail=True, limit=10_000)], default=str
    )
    assert token not in listed and "api-token-that-stays-with-the-client" not in listed
    (env.home / "done").write_text("")
    handle.wait(timeout=60)
    assert not secrets.exists(), "the secrets file outlived its call"
    # The job saw the token: the ping job reports whether HF_TOKEN is set (never its value).
    result = provider.spawn("ping").wait(timeout=120)
    assert result["hf_token_set"] is True and token not in json.dumps(result)
    assert token not in provider.call(handle.call_id).logs()
