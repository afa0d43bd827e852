"""A run on several processes or GPUs on Ray: Ray Train's workers are its ranks.

The train job (in its detached actor, `trainkit_ray.job_actor`) hands the run to a
`ray.train.torch.TorchTrainer` with one worker per rank (``ScalingConfig``: CPU workers for
``--processes N``, one GPU each for ``--gpus N``). Ray Train places the workers on the
cluster, sets up torch's process group (gloo or nccl) and each worker's ``RANK`` and
``WORLD_SIZE``; each worker then runs trainkit's own rank code
(`trainkit_core.training.rank.run_rank`), exactly as torchrun's children do on the other
providers: rank 0 keeps the one run record, events, checkpoints and adapter, the others train
muted. Ray Train's own checkpoints and reports are not used; the run's are trainkit's.

The workers are new processes started by Ray, not children of the job's actor: they get the
settings (no secret) and the storage path through the trainer's config, and read the call's
secrets from its 0600 file on the shared storage, as the actor did.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit_core.plugins.job_context import JobContext
    from trainkit_core.runs.training_run import TrainingRun

#: Seconds Ray Train's process group waits for a peer (a dead worker must not hang the others).
PROCESS_GROUP_TIMEOUT_S = 300


def launcher(storage_root: Path, settings_env: dict[str, str], max_attempts: int) -> Any:
    """The `JobContext.launch_ranks` of a job running in an actor whose storage is `storage_root`."""

    def launch(ctx: JobContext, run: TrainingRun, resume: bool, processes: int) -> str | None:
        return _fit(ctx, run, resume, processes, storage_root, settings_env, max_attempts)

    return launch


def _fit(
    ctx: JobContext,
    run: TrainingRun,
    resume: bool,
    processes: int,
    storage_root: Path,
    settings_env: dict[str, str],
    max_attempts: int,
) -> str | None:
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from trainkit_core.training.distributed import rank_environment

    on_gpus = int(run.config.get("processes") or 1) == 1
    gpu = str(run.config.get("gpu") or "").partition(":")[0]
    scaling: dict[str, Any] = {"num_workers": processes, "use_gpu": on_gpus}
    if on_gpus and gpu:
        from trainkit_ray.placement import ray_accelerator_type

        scaling["accelerator_type"] = ray_accelerator_type(gpu)
    config = {
        "storage": str(storage_root),
        "settings_env": settings_env,
        "rank_env": rank_environment(ctx, run),
        "call_id": ctx.call_id,
        "run_id": run.id,
        "resume": resume,
        "max_attempts": max_attempts,
    }
    trainer = TorchTrainer(
        _worker,
        train_loop_config=config,
        torch_config=TorchConfig(backend="nccl" if on_gpus else "gloo", timeout_s=PROCESS_GROUP_TIMEOUT_S),
        scaling_config=ScalingConfig(**scaling),
        # One attempt: the job's own retries (the actor's restarts) resume the run from its checkpoint.
        run_config=RunConfig(
            name=f"{run.id}-{ctx.call_id}",
            storage_path=str(storage_root / "ray-train"),
            failure_config=FailureConfig(max_failures=0),
        ),
    )
    print(f"trainkit: run {run.id} on {processes} Ray Train workers ({'GPU' if on_gpus else 'CPU'})", flush=True)
    try:
        trainer.fit()
    except Exception as exc:  # Ray Train's TrainingFailedError carries each failed worker's error
        return _failure_text(exc, processes)
    return None


def _failure_text(exc: BaseException, processes: int) -> str:
    """Which worker (rank) failed and with what, from Ray Train's error."""
    failures = getattr(exc, "worker_failures", None)  # {world rank: exception} (Ray Train's WorkerGroupError)
    if isinstance(failures, dict) and failures:
        worker, error = sorted(failures.items())[0]
        return f"rank {worker} of {processes} failed: {_last_line(error)}"
    return f"one of {processes} Ray Train workers failed: {_last_line(exc)}"


def _last_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[-1][:500] if text else type(error).__name__


def _worker(config: dict[str, Any]) -> None:
    """One Ray Train worker: the rank's environment, the job context over the shared storage, the rank's part."""
    os.environ.update(config["settings_env"])
    os.environ.update(config["rank_env"])
    from trainkit_core.settings import Settings
    from trainkit_core.training.rank import run_rank
    from trainkit_ray.contexts import job_context
    from trainkit_ray.storage import MountedStorage

    storage = MountedStorage(Path(config["storage"]))
    os.environ.update(storage.read_secrets(config["call_id"]))
    ctx = job_context(storage, Settings.from_env(), config["call_id"], int(config["max_attempts"]))
    run_rank(ctx, config["run_id"], resume=bool(config["resume"]))
