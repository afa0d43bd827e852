"""The small records the app keeps in its `modal.Dict`s, written and read on both sides.

- ``_calls``: one set per job call. The caller (`ModalRunner`) writes the call's
  record and, on cancel, its cancel request; the container (`container.run_job`)
  writes when the job started and how it ended, so any process can tell pending from
  running and show the job's own error text.
- ``_app``: the last deployment (app id, version, URLs), written by
  `ModalDeployment.deploy` and read by whoever starts a job, to say which deployment
  runs it.
"""

from __future__ import annotations

from typing import Any

from trainkit_core.settings import Settings

CALLS_NAMESPACE = "_calls"

#: The Dict namespace (and key) of the last deployment's record.
APP_NAMESPACE = "_app"
DEPLOYMENT_KEY = "deployment"


def started_key(call_id: str) -> str:
    return f"{call_id}/started"


def ended_key(call_id: str) -> str:
    return f"{call_id}/ended"


def record_key(call_id: str) -> str:
    return f"{call_id}/record"


def cancel_key(call_id: str) -> str:
    return f"{call_id}/cancel"


def deployment_record(sdk: Any, settings: Settings) -> dict[str, Any] | None:
    """The app's last deployment as `deploy()` recorded it (app id, version, URLs), or None."""
    from trainkit_modal.kv import ModalKV

    record = ModalKV.for_settings(sdk, settings, APP_NAMESPACE).get(DEPLOYMENT_KEY)
    return record if isinstance(record, dict) else None
