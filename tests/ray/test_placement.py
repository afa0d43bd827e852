"""What a job asks Ray for, read from its run record until core publishes a job's needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainkit_core.local.kv import LocalKV
from trainkit_core.settings import Settings

# Collected by other sessions too (where trainkit-ray is not installed and the folder is skipped).
placement = pytest.importorskip("trainkit_ray.placement")
job_needs_from_run_record = placement.job_needs_from_run_record


def test_a_training_run_asks_for_the_gpus_its_record_was_priced_for(tmp_path: Path) -> None:
    runs = LocalKV(tmp_path, "runs")
    runs.put("run-a", {"id": "run-a", "price": {"gpu": "A100-80GB", "gpus": 2}})
    runs.put("run-cpu", {"id": "run-cpu", "price": {"gpu": "cpu", "gpus": 0}})
    settings = Settings.from_env()
    needs = job_needs_from_run_record(settings, runs, "train", {"run_id": "run-a"}, 4.0)
    assert needs.actor_options() == {"num_cpus": 4.0, "num_gpus": 2, "accelerator_type": "A100-80G"}
    assert needs.timeout_s == settings.compute.train_timeout_s
    cpu = job_needs_from_run_record(settings, runs, "train", {"run_id": "run-cpu"}, 1.0)
    assert cpu.actor_options() == {"num_cpus": 1.0, "num_gpus": 0}
    # Jobs without a run record ask for CPUs only, and have no timeout of their own.
    ping = job_needs_from_run_record(settings, runs, "ping", {}, 1.0)
    assert ping.actor_options() == {"num_cpus": 1.0, "num_gpus": 0} and ping.timeout_s is None
