"""What a route answers for a result a job writes: the result, or where its job stands.

An eval report or an export exists only once its job has written it. Until then the
route looks up the job's call (kept under the result's key when the job was started)
and answers `running`, or `failed` with the job's error, instead of a bare 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainkit_api.state import ApiState


def result_or_job_state(
    state: ApiState, namespace: str, key: str, read: Callable[[], dict[str, Any]], job: str
) -> dict[str, Any]:
    """`read()` with `status` done; else `running`/`failed` from the call kept under `key`.

    A key with no call kept raises `read`'s NotFoundError: nothing was ever started.
    """
    from trainkit_core.errors import NotFoundError

    try:
        return {**read(), "status": "done"}
    except NotFoundError:
        call_id = state.kv(namespace).get(key)
        if call_id is None:
            raise
    call = state.provider.call(call_id).status()
    if not call.done:
        return {"status": "running"}
    try:  # the job may have written its result just now
        return {**read(), "status": "done"}
    except NotFoundError:
        return {"status": "failed", "error": call.error or f"the {job} job ended {call.state}"}
