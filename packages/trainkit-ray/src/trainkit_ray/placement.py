"""What a job asks Ray for: CPUs, GPUs of a kind, and its time limit.

Until trainkit core publishes a job's needs for every provider, they are read here from
the run record the job works on (the price fixed at launch names the GPU kind and count).
`job_needs` is the one place to switch to the public form when it lands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit_core.hookspecs import KVStore
    from trainkit_core.settings import Settings

#: Jobs that work on a run record (their `run_id` argument) and so have its needs.
RUN_JOBS = ("train", "export")
#: trainkit's GPU names -> Ray's accelerator types (`ray.util.accelerators`), where they differ.
RAY_ACCELERATORS = {"A100-40GB": "A100-40G", "A100-80GB": "A100-80G"}


@dataclass(frozen=True)
class JobNeeds:
    cpus: float
    gpus: int = 0
    gpu_type: str = ""
    timeout_s: float | None = None

    def actor_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": self.cpus, "num_gpus": self.gpus}
        if self.gpus and self.gpu_type:
            options["accelerator_type"] = RAY_ACCELERATORS.get(self.gpu_type, self.gpu_type)
        return options


def job_needs_from_run_record(
    settings: Settings, runs: KVStore, function: str, kwargs: Mapping[str, Any], cpus: float
) -> JobNeeds:
    """The needs of one call, from the run record of `kwargs["run_id"]` (none for other jobs)."""
    timeout = float(settings.compute.train_timeout_s) if function == "train" else None
    run_id = kwargs.get("run_id")
    record = runs.get(run_id) if function in RUN_JOBS and isinstance(run_id, str) else None
    price = (record or {}).get("price") or {}
    gpus = int(price.get("gpus") or 0)
    gpu_type = str(price.get("gpu") or "")  # fixed at launch, TRAINKIT_GPU included
    return JobNeeds(cpus=cpus, gpus=gpus, gpu_type=gpu_type if gpus else "", timeout_s=timeout)
