"""What a job asks Ray for: its `Placement` from core, turned into a Ray actor's options.

Core computes every job's `trainkit_core.plugins.placement.Placement` (GPU kind and count, host
memory, timeout) and hands it to `RayRunner.spawn`, so a 31b run gets a large GPU here
without this package knowing trainkit's presets. CPUs are this provider's own setting
(`TRAINKIT_RAY_JOB_CPUS`): a placement does not name them.

GPU kinds arrive as Modal names them; Ray asks for a kind through ``accelerator_type``,
a resource each node advertises (``accelerator_type:<name>``). Ray labels an NVIDIA node
with the card's short name (``A100``, ``H100``), so most names carry over as they are.
The exceptions are in `RAY_ACCELERATOR_TYPES`; a kind not in it is passed on unchanged,
so a cluster may label its nodes with any name that ``TRAINKIT_GPU`` or a run's ``gpu``
then asks for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit_core.plugins.placement import Placement

#: Modal's GPU names -> Ray's accelerator types (`ray.util.accelerators`), where they differ.
#: ``A100-80GB`` must not land on a 40 GB card, so it asks for ``A100-80G``, a label Ray does
#: not add by itself (a node gets it with ``ray start --resources``, see docs/how-to/ray.md).
#: ``A100-40GB`` is any A100 (an 80 GB card serves it), ``H100!`` (Modal: no H200 upgrade) an H100.
RAY_ACCELERATOR_TYPES = {"A100-40GB": "A100", "A100-80GB": "A100-80G", "H100!": "H100"}
#: Ray counts memory in bytes; a placement in GB (GiB, as Ray's own `memory` figures).
BYTES_PER_GB = 1024**3


def ray_accelerator_type(gpu: str) -> str:
    """The Ray accelerator type a trainkit GPU kind asks for (``"A100-80GB"`` -> ``"A100-80G"``)."""
    return RAY_ACCELERATOR_TYPES.get(gpu, gpu)


def actor_options(placement: Placement, cpus: float) -> dict[str, Any]:
    """The resources of a job's actor (``ray.remote(...).options(**...)``): CPUs, GPUs of a kind, memory.

    The timeout is not a resource: the job's actor enforces it (`job_actor.JobActor`).
    """
    options: dict[str, Any] = {"num_cpus": cpus, "num_gpus": placement.gpu_count if placement.gpu else 0}
    if placement.gpu and placement.gpu_count:
        options["accelerator_type"] = ray_accelerator_type(placement.gpu)
    if placement.memory_gb:
        options["memory"] = placement.memory_gb * BYTES_PER_GB
    return options
