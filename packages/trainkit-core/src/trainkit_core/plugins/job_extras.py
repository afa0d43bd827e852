"""Which pip extra each job needs, and the check every `Deployment.check` can reuse."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping

from trainkit_core.errors import MissingExtraError, NotFoundError

#: The modules each pip extra of trainkit-core must make importable.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "train": ("torch", "transformers", "peft", "trl", "datasets", "accelerate"),
    "gpu": ("unsloth", "bitsandbytes"),
}


def check_extras(functions: Iterable[str], extra_modules: Mapping[str, tuple[str, ...]] | None = None) -> None:
    """Check that each job function exists and that its extra is installed *in this process*.

    For a provider whose jobs run where it is called (processes on this machine):
    raises `NotFoundError` for a job that does not exist and `MissingExtraError` naming
    the modules and the pip extra for one that cannot run here. A provider whose jobs
    run in images of their own checks the jobs exist and leaves the packages to the image.
    """
    from trainkit_core.plugins.jobs import JOB_EXTRAS, JOBS

    modules = EXTRA_MODULES if extra_modules is None else extra_modules
    for function in functions:
        if function not in JOBS:
            raise NotFoundError(f"unknown job function {function!r}; known: {', '.join(sorted(JOBS))}")
        extra = JOB_EXTRAS.get(function)
        if not extra:
            continue
        missing = [m for m in modules[extra] if importlib.util.find_spec(m) is None]
        if missing:
            raise MissingExtraError(
                f"the {function!r} job needs {', '.join(missing)}, which are not installed",
                hint=f"pip install 'trainkit-core[{extra}]'",
            )
