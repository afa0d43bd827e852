"""One run on several processes: the train job launches torch's elastic agent.

A run whose config asks for a world size above 1 (`TrainConfig.gpus` on a provider that
places several GPUs in one machine, over nccl; `TrainConfig.processes`: CPU processes over
gloo, the same code path on a machine without GPUs) is trained by N *ranks*, all of the same
run id. The job the provider started (the *parent*) does not train: it starts
``python -m torch.distributed.run`` (torchrun) as a child, which runs
`trainkit_core.training.rank` once per rank, and waits. trainkit writes no collective
communication of its own: the HF/trl Trainer does DDP when it finds torchrun's environment
(``RANK``, ``WORLD_SIZE`` ...).

Each rank builds the provider's job context again in its own process, as the parent's
context says (`JobContext.rank_context`), with the parent's volume paths.

Who writes what, so that the run looks like any other run:

- rank 0 runs the ordinary train job (`trainkit_core.training.job.train`): the one run
  record, its events and progress, checkpoints and the adapter on the models volume;
- every other rank trains with a *muted* store (`trainkit_core.training.rank._MutedKV`: reads see the real store, so the
  stop flag and the checkpoints reach it; its writes stay in its memory) and writes no file to
  the models volume (`is_main_rank` gates the checkpoint copy and the adapter save);
- the parent records the failure of a rank that died (torchrun ends the others; collective
  timeouts are set in `trainer_arguments` so that no rank waits forever on a dead peer).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import zlib
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import JobError

if TYPE_CHECKING:
    from trainkit_core.plugins.job_context import JobContext
    from trainkit_core.runs.training_run import TrainingRun

#: Seconds a collective waits for a peer before the rank fails (a dead rank must not hang the run).
COLLECTIVE_TIMEOUT_S = 300

#: Where the ports of a run on several machines start (`rendezvous_port`): torchrun's default.
RENDEZVOUS_BASE_PORT = 29500

#: The parent's volume paths, for a rank's job context (JSON of kind -> folder).
VOLUME_PATHS_ENV = "TRAINKIT_DIST_VOLUME_PATHS"


def _field(config: dict[str, Any] | Any, name: str) -> int:
    value = config.get(name) if isinstance(config, dict) else getattr(config, name, 1)
    return int(value or 1)


def world_size(config: dict[str, Any] | Any) -> int:
    """The number of ranks a run's config asks for: its CPU processes, else its GPUs on all its nodes."""
    processes = _field(config, "processes")
    return processes if processes > 1 else _field(config, "gpus") * _field(config, "nodes")


def per_device_batch(config: dict[str, Any] | Any) -> int:
    """Examples per rank per micro-step.

    ``--processes`` splits `batch_size` (it stays the global batch, so a 2-process run matches a
    1-process one step for step); ``--gpus``/``--nodes`` keep it per device, as a preset's batch
    is what fits one GPU, and adding GPUs makes the global batch larger.
    """
    batch = int((config.get("batch_size") if isinstance(config, dict) else config.batch_size) or 1)
    processes = _field(config, "processes")
    return max(1, batch // processes) if processes > 1 else batch


def in_rank() -> bool:
    """Whether this process is one of torchrun's ranks (its environment says so)."""
    return "TRAINKIT_DIST_RANK_OF" in os.environ and "RANK" in os.environ


def rank() -> int:
    """This process's rank; 0 outside a distributed run."""
    return int(os.environ.get("RANK", "0")) if in_rank() else 0


def is_main_rank() -> bool:
    """Whether this process writes the run's record and files (rank 0, or no distributed run at all)."""
    return rank() == 0


def check_devices(world: int, uses_gpus: bool) -> None:
    """A run on N GPUs whose machine shows fewer to CUDA fails before any rank starts."""
    if not uses_gpus:
        return
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() < world:
        raise JobError(
            f"the run asks for {world} GPUs but this machine shows {torch.cuda.device_count()} to CUDA "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"
        )


def launch(
    ctx: JobContext,
    run: TrainingRun,
    resume: bool,
    end: Callable[..., None],
    retry_later: Callable[..., None],
) -> dict[str, Any]:
    """Run the ranks of `run` and wait; a rank's failure fails the attempt (`end`, `retry_later`: the job's).

    The provider's launcher starts them where it has one (`JobContext.launch_ranks`: Ray
    Train on the ray provider), else torchrun on this machine. A failed attempt with attempts
    left leaves the run resumable, as a single-process attempt does: the provider's retry
    starts the ranks again from the latest checkpoint.
    """
    processes = world_size(run.config)
    if ctx.launch_ranks is None and not ctx.rank_context:
        raise JobError(
            f"run {run.id} asks for {processes} processes, but a {ctx.provider} job's context cannot be built "
            "again in another process (the provider sets no rank_context)"
        )
    _build_local_base(ctx, run)
    error = (ctx.launch_ranks or _torchrun)(ctx, run, resume, processes)
    if ctx.node_rank != 0:
        # Another machine of the run: node 0's job keeps the record and ends the run.
        if error is not None:
            raise JobError(f"run {run.id}, node {ctx.node_rank}: {error}")
        return {"run_id": run.id, "node_rank": ctx.node_rank}
    run = run.store.get(run.id)
    if error is not None:
        if run.ended():
            pass  # rank 0 ended it (a stop, or a failure it saw first)
        elif run.call_attempts < run.max_attempts:
            retry_later(ctx, run, error)
        else:
            end(ctx, run, "failed", error=error)
        raise JobError(f"run {run.id} failed: {run.error_message or error}")
    return {"run_id": run.id, "status": run.status, "step": run.step, "metrics": run.metrics}


def _build_local_base(ctx: JobContext, run: TrainingRun) -> None:
    """Build the tiny model or a twin here, once, before the ranks load it.

    Left to the ranks, each would build it at once; and where the launcher set up torch's
    process group before trainkit's code runs (Ray Train), transformers' `save_pretrained`
    writes nothing on a rank other than 0, so that rank's build would rename a folder
    without weights into place.
    """
    from trainkit_core.models.trained.layout import base_model_path, resolve_base_model

    base = str(run.config.get("base_model") or "")
    if not base:
        from trainkit_core.models.presets import get_preset

        base = get_preset(str(run.config.get("model_size") or "tiny")).base_model
    if base_model_path(base):
        resolve_base_model({"base_model": base}, ctx.path("hf-cache"))


def rank_environment(ctx: JobContext, run: TrainingRun) -> dict[str, str]:
    """What a rank's process needs besides its launcher's variables: whose rank it is, and the volumes' paths."""
    return {
        "TRAINKIT_DIST_RANK_OF": run.id,
        VOLUME_PATHS_ENV: json.dumps({kind: str(path) for kind, path in ctx.volume_paths.items()}),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }


def rendezvous_port(call_id: str) -> int:
    """The port node 0's ranks are met at: one per call, so two runs on one host never collide."""
    return RENDEZVOUS_BASE_PORT + zlib.crc32(call_id.encode()) % 1000


def _placement_arguments(ctx: JobContext, run: TrainingRun, processes: int) -> list[str]:
    """torchrun's arguments for one machine (``--standalone``), or for this node of several."""
    nodes = _field(run.config, "nodes")
    if nodes == 1:
        return ["--standalone", f"--nproc-per-node={processes}"]
    if len(ctx.node_addresses) != nodes:
        raise JobError(
            f"run {run.id} asks for {nodes} nodes, but this job runs on "
            f"{len(ctx.node_addresses) or 1} (the provider started no cluster of {nodes})"
        )
    host = ctx.node_addresses[0]
    return [
        f"--nnodes={nodes}",
        f"--node-rank={ctx.node_rank}",
        f"--nproc-per-node={processes // nodes}",
        f"--master-addr={host}",
        f"--master-port={rendezvous_port(ctx.call_id)}",
    ]


def _torchrun(ctx: JobContext, run: TrainingRun, resume: bool, processes: int) -> str | None:
    """The ranks as children of torch's elastic agent on this machine; the failure's text, or None."""
    per_node = processes // _field(run.config, "nodes")
    check_devices(per_node, uses_gpus=_field(run.config, "processes") == 1)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *_placement_arguments(ctx, run, processes),
        "--max-restarts=0",
        "-m",
        "trainkit_core.training.rank",
        ctx.rank_context,
        ctx.call_id,
        run.id,
        "resume" if resume else "fresh",
    ]
    error_file = Path(tempfile.mkdtemp(prefix=f"trainkit-{run.id}-ranks-")) / "rank0-error.txt"
    env = {**os.environ, **rank_environment(ctx, run), "TRAINKIT_DIST_ERROR_FILE": str(error_file)}
    where = f" (node {ctx.node_rank} of {len(ctx.node_addresses)})" if ctx.node_addresses else ""
    print(f"trainkit: run {run.id} on {processes} processes{where}: {' '.join(command)}", flush=True)
    tail: deque[str] = deque(maxlen=200)
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    ) as agent:
        assert agent.stdout is not None
        for line in agent.stdout:  # the job's log gets every rank's output
            sys.stdout.write(line)
            tail.append(line)
        sys.stdout.flush()
        code = agent.wait()
    seen = error_file.read_text().strip() if error_file.exists() else ""
    error_file.unlink(missing_ok=True)
    if code == 0:
        return None
    # The launcher's first failure names the rank that died; rank 0 left what it saw (often
    # only a peer's closed connection) for this job to add, as it does not end the run itself.
    error = failure_text(list(tail), code, processes)
    return f"{error}; rank 0: {seen}" if seen else error


def record_rank_error(text: str) -> None:
    """Rank 0's error, for the launching job to put in the run's error (it ends the run, not the rank)."""
    path = os.environ.get("TRAINKIT_DIST_ERROR_FILE")
    if path and rank() == 0:
        Path(path).write_text(text[:2000])


def failure_text(lines: list[str], code: int, processes: int) -> str:
    """Which rank failed and how, from torchrun's failure summary (its "Root Cause" block)."""
    text = "".join(lines)
    root = text.rfind("Root Cause")
    block = text[root:] if root >= 0 else ""
    found_rank = re.search(r"rank\s*:\s*(\d+)", block)
    found_exit = re.search(r"exitcode\s*:\s*(-?\d+)", block)
    found_signal = re.search(r"\((SIG[A-Z]+)\)", block)
    where = f"rank {found_rank.group(1)} of {processes}" if found_rank else f"one of {processes} ranks"
    how = f"exit code {found_exit.group(1)}" if found_exit else f"launcher exit code {code}"
    if found_signal:
        how += f", killed by {found_signal.group(1)}"
    return f"{where} failed ({how})"
