"""The `JobContext` of a job on the cluster: the store and volumes on the shared storage path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainkit_core.plugins.hookspecs import VOLUME_KINDS
from trainkit_ray.storage import MountedStorage

PROVIDER = "ray"


def job_context(
    storage: MountedStorage,
    settings: Any,
    call_id: str,
    max_attempts: int,
    launch_ranks: Callable[..., str | None] | None = None,
) -> Any:
    """A job's context; `launch_ranks` starts a run's ranks (the job actor's: Ray Train, `train_ranks`)."""
    from trainkit_core.plugins.jobs import JobContext

    paths = {kind: storage.volume_root(settings.volumes.name_for(kind)) for kind in VOLUME_KINDS}
    return JobContext(
        settings=settings,
        provider=PROVIDER,
        call_id=call_id,
        kv_factory=storage.kv,
        volume_paths=paths,
        max_attempts=max_attempts,
        launch_ranks=launch_ranks,
    )
