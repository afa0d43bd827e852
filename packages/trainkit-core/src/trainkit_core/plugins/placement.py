"""What a job needs of the machine that runs it, as public data any provider reads.

A provider places a job by its `Placement`: the GPU kind and count, host memory and
timeout. The provider facade computes it for every call and hands it to a runner
whose `FunctionRunner.spawn` takes a ``placement`` argument (a provider that declares
the `gpu` capability must: the conformance suite checks it). A provider can also
compute it itself with `placement_of(provider, job, kwargs)`, which reads the run
behind a train call or a trained model (as the Modal app's routing does). So a provider places a 31b run on a large GPU without knowing trainkit's
presets.

GPU kinds are named as Modal names them (``A10G``, ``A100-80GB``, ``H100``): the
presets' names, or ``TRAINKIT_GPU`` / a run's ``gpu`` when set. A provider maps them to
its own hardware names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit_core.plugins.provider import Provider
    from trainkit_core.settings import Settings

#: Jobs whose hardware follows the model they load (its size's preset).
SIZED_JOBS = frozenset({"train", "eval", "export", "gpu_ping", "infer"})
#: Timeouts of the jobs that are not training (seconds); training's is `TRAINKIT_TRAIN_TIMEOUT_S`.
JOB_TIMEOUT_S = {"eval": 3600, "export": 3600, "gpu_ping": 3600, "infer": 1800}
#: Every other job (ping, dataset checks): short, on CPU.
LIGHT_TIMEOUT_S = 600
#: Host memory per model size, in GB: room to load the base model's shards before they
#: move to the GPU. Estimates from the models' sizes on disk (bf16 weights: 4b ~8 GB,
#: 12b ~24 GB, 31b ~62 GB, e2b ~10 GB, e4b ~16 GB with their audio and vision towers,
#: 26b-a4b ~52 GB, loaded in bf16: no 4-bit checkpoint of it), not measured.
HOST_MEMORY_GB = {"tiny": 4, "4b": 16, "12b": 32, "31b": 64, "e2b": 16, "e4b": 24, "26b-a4b": 96}
#: `trainkit_core.runs.training_run.RUNS_NAMESPACE`, named here: importing the runs module from the
#: provider facade's path would make an import cycle (a test checks they agree).
RUNS_NAMESPACE = "runs"
#: How a trained model's path starts (`trainkit_core.models.trained.paths.trained_dir`); its next part is the run id.
TRAINED_PREFIX = "trained/"
#: The size a call means when it names none (a base model given by id runs on 4b hardware).
DEFAULT_SIZE = "4b"


@dataclass(frozen=True)
class Placement:
    """What one job needs: a GPU kind and count (none: a CPU job), host memory, a timeout."""

    #: GPU kind (``"A100-80GB"``); None for a CPU job.
    gpu: str | None = None
    #: How many GPUs of that kind on each node (0 for a CPU job).
    gpu_count: int = 0
    #: How many machines (nodes) the job spans, each with `gpu_count` GPUs; 1 for every job but a multi-node run.
    nodes: int = 1
    #: Host memory in GB; None when the job does not say (the provider's default).
    memory_gb: int | None = None
    #: Longest the job may run, in seconds (a longer training run resumes from its checkpoint).
    timeout_s: int = LIGHT_TIMEOUT_S

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Placement:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def split_gpu(text: str) -> tuple[str | None, int]:
    """``"H100:2"`` -> ``("H100", 2)``; ``""`` -> ``(None, 0)``."""
    text = text.strip()
    if not text:
        return None, 0
    kind, _, count = text.partition(":")
    return kind.upper(), int(count) if count else 1


def _size_of(config: Mapping[str, Any]) -> str:
    value = config.get("model_size") or config.get("size")
    return value if isinstance(value, str) and value else DEFAULT_SIZE


def placement_for(job: str, config: Mapping[str, Any], settings: Settings) -> Placement:
    """The placement of `job` for a model choice (``model_size``, ``gpu``: a call's arguments or its run's config).

    The GPU: the run's own ``gpu``, else ``TRAINKIT_GPU``, else the size's preset's.
    """
    if job not in SIZED_JOBS:
        return Placement(timeout_s=LIGHT_TIMEOUT_S)
    from trainkit_core.models.presets import PRESETS

    size = _size_of(config)
    preset = PRESETS.get(size)
    wanted = config.get("gpu") if isinstance(config.get("gpu"), str) else ""
    gpu, count = split_gpu(wanted or settings.compute.gpu or (preset.gpu if preset else ""))
    timeout = settings.compute.train_timeout_s if job == "train" else JOB_TIMEOUT_S[job]
    # A run's `gpus`/`nodes` place its training; other jobs on its model (eval, infer) use one GPU.
    asked = config.get("gpus") if job == "train" else None
    if isinstance(asked, int) and asked > 1:
        count = asked
    nodes = config.get("nodes") if job == "train" else 1
    nodes = nodes if isinstance(nodes, int) and nodes >= 1 else 1
    return Placement(gpu=gpu, gpu_count=count, nodes=nodes, memory_gb=HOST_MEMORY_GB.get(size), timeout_s=timeout)


def _run_behind(job: str, call: Mapping[str, Any]) -> str | None:
    """The run whose config sizes a call that names no size: a train call's run, or the run
    that made the trained model a call loads (``trained/<run id>[/checkpoints/<step>]``)."""
    if call.get("model_size"):
        return None
    if job == "train" and call.get("run_id"):
        return str(call["run_id"])
    path = call.get("model_path")
    if isinstance(path, str) and path.startswith(TRAINED_PREFIX):
        run_id = path.split("/")[1]
        return run_id if run_id.startswith("run-") else None
    return None


def job_config(provider: Provider, job: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A call's model choice: its arguments, else the config of the run behind it (`_run_behind`).

    A model trained from ``tiny`` so runs where ``tiny`` trains (on CPU), not on the
    default size's GPU.
    """
    config = kwargs.get("config")
    call = {**kwargs, **config} if isinstance(config, dict) else dict(kwargs)
    run_id = _run_behind(job, call)
    record = provider.kv(RUNS_NAMESPACE).get(run_id) if run_id else None
    run_config = record.get("config") if isinstance(record, dict) else None
    if not isinstance(run_config, dict):
        return call
    if job == "train":
        return dict(run_config)
    return {**call, "model_size": run_config.get("model_size"), "gpu": call.get("gpu") or run_config.get("gpu")}


def placement_of(provider: Provider, job: str, kwargs: Mapping[str, Any]) -> Placement:
    """The placement of one call of `job` on `provider` (reads a train call's run)."""
    return placement_for(job, job_config(provider, job, kwargs), provider.settings)
