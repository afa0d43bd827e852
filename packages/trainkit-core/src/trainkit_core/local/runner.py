"""Local job calls: detached processes whose records live in the local SQLite store.

The runner itself is the public `trainkit_core.toolkit.detached.DetachedRunner`, which any
provider can reuse; this module wires it to the local provider's home and re-exports
the liveness helpers other local modules use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trainkit_core.toolkit.detached import CALLS_NAMESPACE, CANCEL_GRACE_S, DetachedRunHandle, DetachedRunner
from trainkit_core.toolkit.processes import alive, describe_exit, process_start_time
from trainkit_core.toolkit.sqlite_kv import LocalKV

if TYPE_CHECKING:
    from trainkit_core.settings import Settings

__all__ = [
    "CALLS_NAMESPACE",
    "CANCEL_GRACE_S",
    "LocalRunHandle",
    "LocalRunner",
    "alive",
    "describe_exit",
    "logs_dir",
    "process_start_time",
]

#: A local call, as `DetachedRunHandle` (kept as a name: tests and tools read its `pid`).
LocalRunHandle = DetachedRunHandle


def logs_dir(home: Path) -> Path:
    return Path(home) / "logs"


class LocalRunner(DetachedRunner):
    """The `run_function` answer of the local provider: call ids ``lc-…``, logs under the home."""

    def __init__(self, home: Path, settings: Settings | None = None) -> None:
        self.home = Path(home)
        super().__init__(
            provider="local",
            calls=LocalKV(self.home, CALLS_NAMESPACE),
            logs_dir=logs_dir(self.home),
            job_context="trainkit_core.local.plugin:job_context",
            settings=settings,
            env={"TRAINKIT_HOME": str(self.home.resolve())},
            call_prefix="lc-",
        )
