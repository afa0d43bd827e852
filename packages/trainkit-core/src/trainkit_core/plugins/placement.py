"""What a job needs of the machine that runs it, as public data any provider reads.

A provider places a job by its `Placement`: the GPU kind and count, host memory and
timeout. The provider facade computes it for every call and hands it to a runner
whose `FunctionRunner.spawn` takes a ``placement`` argument (a provider that declares
the `gpu` capability must: the conformance suite checks it). A provider can also
compute it itself with `placement_of(provider, job, kwargs)`. Both read the run behind a
train call or a trained model through `call_config`, which the Modal provider's routing
to its declared functions reads too: one reading of a call's model choice. So a provider
places a 31b run on a large GPU without knowing trainkit's presets.

GPU kinds are named as Modal names them (``A10G``, ``A100-80GB``, ``H100``): the
presets' names, or ``TRAINKIT_GPU`` / a run's ``gpu`` when set. A provider maps them to
its own hardware names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import NotFoundError

if TYPE_CHECKING:
    from trainkit_core.plugins.hookspecs import KVStore, Volume
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
    """The run whose config sizes a call that names no model: a train call's run, or the run
    that made the trained model a call loads (``trained/<run id>[/checkpoints/<step>]``)."""
    if call.get("model_size") or call.get("base_model"):
        return None
    if job == "train" and call.get("run_id"):
        return str(call["run_id"])
    path = call.get("model_path")
    if isinstance(path, str) and path.startswith(TRAINED_PREFIX):
        run_id = path.split("/")[1]
        return run_id if run_id.startswith("run-") else None
    return None


def call_config(
    runs: KVStore, job: str, kwargs: Mapping[str, Any], *, models: Callable[[], Volume] | None = None
) -> dict[str, Any]:
    """A call's model choice (``model_size``, ``base_model``, ``gpu``): its arguments, else the run behind it.

    The run's record in `runs` says what it trained from (`_run_behind`), so a model
    trained from ``tiny`` runs where ``tiny`` trains (on CPU), not on the default size's
    GPU. When the store no longer holds that record (a Modal Dict forgets entries idle
    for 7 days), the model's card on the models volume says it (`models` gives the volume,
    asked for only then). A train call's run must have a
    record: there is nothing to train otherwise (`NotFoundError`). Every provider's
    routing reads a call through here, the facade's `placement_of` and Modal's choice of
    a declared function alike.
    """
    config = kwargs.get("config")
    call = {**kwargs, **config} if isinstance(config, dict) else dict(kwargs)
    run_id = _run_behind(job, call)
    if run_id is None:
        return call
    record = runs.get(run_id)
    run_config = record.get("config") if isinstance(record, dict) else None
    if job == "train":
        if not isinstance(run_config, dict):
            raise NotFoundError(f"no run {run_id!r} to train", hint="start a run with `trainkit train`")
        return dict(run_config)
    found = run_config if isinstance(run_config, dict) else _card_config(models, str(call["model_path"]))
    if found is None:
        return call  # the job validates the path again and says what is wrong
    chosen = {"model_size": found.get("model_size"), "gpu": call.get("gpu") or found.get("gpu")}
    return {**call, **chosen, **({"base_model": found["base_model"]} if found.get("base_model") else {})}


def _card_config(models: Callable[[], Volume] | None, model_path: str) -> dict[str, Any] | None:
    """Size, base model and GPU of a trained model from its card; None when there is none to read."""
    from trainkit_core.errors import TrainkitError
    from trainkit_core.models.trained import parse_model_path, read_card

    if models is None:
        return None
    try:
        card = read_card(models(), parse_model_path(model_path))
    except TrainkitError:
        return None
    return {"model_size": card.preset, "base_model": card.base_model, "gpu": card.config.get("gpu") or ""}


def job_config(provider: Provider, job: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """`call_config` on `provider`'s run records and models volume."""
    return call_config(provider.kv(RUNS_NAMESPACE), job, kwargs, models=lambda: provider.volume("models"))


def placement_of(provider: Provider, job: str, kwargs: Mapping[str, Any]) -> Placement:
    """The placement of one call of `job` on `provider` (reads a train call's run)."""
    return placement_for(job, job_config(provider, job, kwargs), provider.settings)
