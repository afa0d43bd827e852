"""What a job asks Ray for: core's `Placement` as its actor's resources (no GPU needed to see them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ray_helpers import RayEnv, wait_for

from trainkit_core.errors import UsageError
from trainkit_core.plugins.placement import Placement, placement_for
from trainkit_core.settings import Settings

# Collected by other sessions too (where trainkit-ray is not installed and the folder is skipped).
placement = pytest.importorskip("trainkit_ray.placement")

GIB = 1024**3
#: docs/how-to/ray.md's table: Modal's GPU names (docs/developer/facts.md) -> the Ray accelerator type asked for.
DOCUMENTED = {
    "T4": "T4",
    "L4": "L4",
    "A10": "A10",
    "A10G": "A10G",
    "L40S": "L40S",
    "A100": "A100",
    "A100-40GB": "A100",
    "A100-80GB": "A100-80G",
    "H100": "H100",
    "H100!": "H100",
    "H200": "H200",
    "B200": "B200",
}


def test_gpu_kinds_map_to_the_accelerator_types_ray_knows() -> None:
    from ray.util.accelerators import accelerators

    known = {value for name, value in vars(accelerators).items() if name.isupper() and isinstance(value, str)}
    assert {gpu: placement.ray_accelerator_type(gpu) for gpu in DOCUMENTED} == DOCUMENTED
    # Ray's own names (an NVIDIA A10 card is labelled by its name, "A10", which Ray keeps no constant for).
    assert set(DOCUMENTED.values()) - {"A10"} <= known
    assert placement.ray_accelerator_type("MY-CARD") == "MY-CARD", "a cluster's own label passes unchanged"


def test_a_31b_run_asks_for_a_large_gpu_and_its_host_memory() -> None:
    settings = Settings.from_env()
    needs = placement_for("train", {"model_size": "31b"}, settings)
    assert needs.gpu == "A100-80GB" and needs.gpu_count == 1
    assert placement.actor_options(needs, 4.0) == {
        "num_cpus": 4.0,
        "num_gpus": 1,
        "accelerator_type": "A100-80G",
        "memory": 64 * GIB,
    }
    two = Placement(gpu="H100", gpu_count=2, memory_gb=None, timeout_s=60)
    assert placement.actor_options(two, 1.0) == {"num_cpus": 1.0, "num_gpus": 2, "accelerator_type": "H100"}
    # The tiny model runs on CPU: memory, no GPU; a light job asks for CPUs only.
    tiny = placement_for("train", {"model_size": "tiny"}, settings)
    assert placement.actor_options(tiny, 1.0) == {"num_cpus": 1.0, "num_gpus": 0, "memory": 4 * GIB}
    assert placement.actor_options(placement_for("ping", {}, settings), 1.0) == {"num_cpus": 1.0, "num_gpus": 0}


def test_a_31b_training_call_reaches_ray_with_its_placement(
    tmp_path_factory: pytest.TempPathFactory, ray_cluster: Any
) -> None:
    """Through the provider, as the CLI starts it: the run record's 31b choice becomes the actor's resources.

    The cluster has no GPU, so the actor waits (infeasible) and never runs; Ray's state API
    shows what it asks for, then the call is cancelled.
    """
    from ray.util.state import list_actors

    env = RayEnv(tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("datasets"), ray_cluster.address)
    provider = env.provider()
    provider.kv("runs").put("run-31b", {"id": "run-31b", "config": {"model_size": "31b"}})
    handle = provider.spawn("train", run_id="run-31b")
    try:
        actor = wait_for(
            lambda: next(
                (
                    a
                    for a in list_actors(address=ray_cluster.address, detail=True, limit=10_000)
                    if a.name == handle.call_id
                ),
                None,
            ),
            60,
            "the call's actor in Ray's listing",
        )
        wanted = dict(actor.required_resources)
        assert wanted == {"CPU": 1.0, "GPU": 1.0, "memory": 64.0 * GIB, "accelerator_type:A100-80G": 0.001}
        assert actor.state != "ALIVE"
        record = handle.record()
        assert record["timeout_s"] == Settings.from_env().compute.train_timeout_s
        assert record["placement"]["gpu"] == "A100-80GB" and record["state"] == "pending"
    finally:
        handle.cancel()
    assert handle.status().state == "cancelled"


def test_a_spawn_without_placement_is_refused(tmp_path: Path, ray_cluster: Any) -> None:
    env = RayEnv(tmp_path / "home", tmp_path / "datasets", ray_cluster.address)
    runner = env.provider().runner()
    with pytest.raises(UsageError, match="no placement"):
        runner.spawn("ping", {})
