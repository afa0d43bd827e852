"""The job functions providers run, by name.

A job function is ``fn(ctx: JobContext, **kwargs) -> JSON-able result``. It runs
inside the provider's process or container and never imports a provider SDK: the
provider hands it a `JobContext` with the key-value stores and the volumes' mount
points. Names map to import paths so that looking a job up imports nothing heavy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from trainkit_core.errors import NotFoundError
from trainkit_core.plugins.job_context import JobContext

#: name -> "module:function" of every job function.
JOBS: dict[str, str] = {
    "ping": "trainkit_core.jobs.ping:ping",
    "gpu_ping": "trainkit_core.jobs.ping:gpu_ping",
    "sleep": "trainkit_core.jobs.ping:sleep",
    "fail": "trainkit_core.jobs.ping:fail",
    "infer": "trainkit_core.jobs.infer:infer",
    "eval": "trainkit_core.jobs.evaluate:evaluate",
    "train": "trainkit_core.training.job:train",
    "export": "trainkit_core.export.job:export",
}

#: The pip extra each job needs beyond trainkit-core itself (checked by `Deployment.check`).
JOB_EXTRAS: dict[str, str] = {}
JOB_EXTRAS["infer"] = "train"
JOB_EXTRAS["eval"] = "train"
JOB_EXTRAS["train"] = "train"
JOB_EXTRAS["export"] = "train"


def resolve(name: str) -> Callable[..., Any]:
    """Import and return the job function `name`; `NotFoundError` listing the known jobs."""
    try:
        target = JOBS[name]
    except KeyError:
        raise NotFoundError(f"unknown job function {name!r}; known: {', '.join(sorted(JOBS))}") from None
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]


__all__ = ["JOBS", "JOB_EXTRAS", "JobContext", "resolve"]
