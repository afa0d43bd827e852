"""The reconciler: no run stays `pending` or `running` once its job is gone.

Asked whenever a reader looks at an unfinished run (`TrainingRun.wait`, `runs list`,
the API): when the provider says the run's job call ended but the record is not
terminal, or the run never got a job within `PENDING_TIMEOUT_S`, the run becomes
`failed` with the reason, and an event says so.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from trainkit_core.errors import NotFoundError, OutOfSpaceError, TrainkitError

log = logging.getLogger(__name__)

PENDING_TIMEOUT_S = 15 * 60
#: Why a run that was interrupted (SIGINT) ends when its provider did not start the job again.
PREEMPTED_NOT_RESTARTED = (
    "interrupted (SIGINT) and not restarted by the provider; `trainkit runs resume` continues it "
    "from its latest checkpoint"
)


def reconcile_run(run: Any) -> bool:
    """Fix the record of one unfinished run; True when it changed."""
    if run.ended():
        return False
    provider = run.store.provider
    reason = None
    call_id = run.call_id  # the submitter saves it; the job too, should its submitter have died before
    if call_id and provider is not None:
        try:
            status = provider.call(call_id).status()
        except NotFoundError as exc:
            status = None
            reason = f"the run's job {call_id} cannot be found: {exc.message}"
        except TrainkitError:
            return False  # the provider cannot answer now (network, credentials): decide later
        if status is not None and status.done:
            run.reload()
            if run.ended():
                return False  # the job finished its record just now
            if run.status == "preempted":
                # The job recorded a SIGINT (`training.job`) and its call ended without a restart:
                # that, not the KeyboardInterrupt the call reports, is why the run ends.
                reason = PREEMPTED_NOT_RESTARTED
            elif status.state == "succeeded":
                reason = "the job ended without finishing the run's record"
            elif status.state == "cancelled":
                reason = "the job was cancelled"
            else:
                reason = f"the job died: {status.error or 'no error text'}"
    elif not call_id and time.time() - max(run.created_at, run.updated_at) > PENDING_TIMEOUT_S:
        reason = f"the run never started a job within {PENDING_TIMEOUT_S // 60} minutes"
    if reason is None:
        return False
    now = time.time()
    # The job's last sign of life is its last write: its time is counted to there, not to now.
    run.end_attempt(min(now, max(run.updated_at, run.attempt_started_at or 0.0)))
    run.status = "failed"
    run.ended_at = now
    run.error_message = reason
    try:
        run.save()
        run.events.append("status", status="failed", reason=reason)
    except OutOfSpaceError as exc:  # the reader still sees the run as it is; a later read records it
        log.warning("run %s: could not record that it failed: %s", run.id, exc.message)
        return True
    try:
        # The job that died never copied the record and events to the models volume, the
        # durable history a reader falls back to once the key-value store forgets them.
        run.write_history()
    except TrainkitError as exc:
        log.warning("run %s: could not write its history to the models volume: %s", run.id, exc.message)
    return True
