"""trainkit's own errors back from the cluster: Ray wraps what an actor raises."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from trainkit_core.errors import JobError, TrainkitError


@contextmanager
def unwrap() -> Iterator[None]:
    """Re-raise a trainkit error an actor raised as itself; any other failure as `JobError`."""
    from ray.exceptions import RayActorError, RayTaskError

    try:
        yield
    except RayTaskError as exc:
        cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else None
        if isinstance(cause, TrainkitError):
            raise cause from None
        raise JobError(f"the Ray actor failed: {cause or exc}") from None
    except RayActorError as exc:
        raise JobError(f"the Ray actor died: {exc}") from None
