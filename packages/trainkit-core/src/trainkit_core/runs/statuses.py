"""A run's statuses, listed once: the record's type, the CLI's and the web API's filters read them here.

Light on purpose (no pydantic, no store): `trainkit runs list --status` builds its choices
from it at import, and `trainkit --help` must start fast.
"""

from __future__ import annotations

from typing import Literal, get_args

RunStatus = Literal["pending", "running", "succeeded", "failed", "stopped", "preempted"]
#: Every status, in the order a run meets them (a run may skip some).
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
#: The run ended; nothing changes its status any more but a resume (a new attempt).
TERMINAL_STATUSES = ("succeeded", "failed", "stopped")
#: The run's job is still to start or under way.
UNFINISHED = ("pending", "running")
