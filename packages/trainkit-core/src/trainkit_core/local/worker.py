"""Runs one local job call in-process (`python -m trainkit_core.local.worker ID`)."""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from trainkit_core.local.kv import LocalKV
from trainkit_core.local.runner import CALLS_NAMESPACE


def _finish(record: dict, **changes: object) -> dict:  # type: ignore[type-arg]
    if record["state"] not in ("pending", "running"):
        return record  # cancelled meanwhile: the cancel wins
    return {**record, **changes, "ended_at": time.time()}


def main() -> int:
    call_id = sys.argv[1]
    home = Path(os.environ["TRAINKIT_HOME"])
    calls = LocalKV(home, CALLS_NAMESPACE)
    record = calls.get(call_id)
    print(f"trainkit: job {record['function']} call {call_id} pid {os.getpid()}", flush=True)
    try:
        from trainkit_core.jobs import resolve
        from trainkit_core.local.plugin import job_context
        from trainkit_core.settings import Settings

        settings = Settings.from_env()
        ctx = job_context(settings, call_id)
        result = resolve(record["function"])(ctx, **record["kwargs"])
        import json

        # A result that cannot be stored is the job's error (the store refuses NaN too).
        json.dumps(result, allow_nan=False)
    except BaseException as exc:
        traceback.print_exc()
        message = f"{type(exc).__name__}: {exc}"
        calls.update(call_id, lambda r: _finish(r, state="failed", error=message))
        return 1
    calls.update(call_id, lambda r: _finish(r, state="succeeded", result=result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
