"""The small records the app keeps in its `modal.Dict`s, written and read on both sides.

- ``_calls``: one set per job call. The caller (`ModalRunner`) writes the call's
  record and, on cancel, its cancel request; the container (`container.run_job`)
  writes when the job started and how it ended, so any process can tell pending from
  running and show the job's own error text.
- ``_app``: the last deployment (app id, version, URLs), written by
  `ModalDeployment.deploy` and read by whoever starts a job, to say which deployment
  runs it. Also kept on the models volume (`DEPLOYMENT_PATH`): Modal drops a Dict
  entry after 7 days without a read or write, and a stopped app is found only by the
  id this record keeps.
"""

from __future__ import annotations

import json
from typing import Any

from trainkit_core.settings import Settings

CALLS_NAMESPACE = "_calls"

#: The Dict namespace (and key) of the last deployment's record.
APP_NAMESPACE = "_app"
DEPLOYMENT_KEY = "deployment"
#: The durable copy of the deployment record, on the models volume.
DEPLOYMENT_PATH = "_app/deployment.json"


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
    if isinstance(record, dict):
        return record
    return _durable_deployment_record(sdk, settings)


def remember_deployment(sdk: Any, settings: Settings, record: dict[str, Any]) -> None:
    """Keep the deployment record on the models volume first (the durable copy), then in the ``_app`` Dict."""
    from trainkit_modal.kv import ModalKV

    _models(sdk, settings).write_bytes(DEPLOYMENT_PATH, json.dumps(record, sort_keys=True).encode())
    ModalKV.for_settings(sdk, settings, APP_NAMESPACE).put(DEPLOYMENT_KEY, record)


def _models(sdk: Any, settings: Settings) -> Any:
    from trainkit_modal.volume import ModalVolume

    return ModalVolume(sdk, settings.volumes.name_for("models"))


def _durable_deployment_record(sdk: Any, settings: Settings) -> dict[str, Any] | None:
    """The copy on the models volume, for when the Dict forgot it; None when absent or not whole."""
    volume = _models(sdk, settings)
    if not volume.exists(DEPLOYMENT_PATH):
        return None
    try:
        record = json.loads(volume.read_bytes(DEPLOYMENT_PATH))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
