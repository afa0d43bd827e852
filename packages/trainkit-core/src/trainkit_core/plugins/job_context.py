"""What a job function gets from its provider: state stores and volume mount points."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trainkit_core.errors import UsageError
from trainkit_core.plugins.hookspecs import VOLUME_KINDS, KVStore

if TYPE_CHECKING:
    from trainkit_core.settings import Settings


def _no_op(kind: str) -> None:
    return None


@dataclass
class JobContext:
    """Built by the provider for each call.

    `volume_paths` maps a volume kind (`data`, `models`, `eval`, `hf-cache`) to the
    directory where that volume is visible inside the job. `commit` makes writes to a
    volume visible to other processes (a no-op where writes are visible at once);
    `reload` shows writes others committed.

    `max_attempts` is how many times the provider runs one call of the job before it
    gives up (1 where it never retries, as locally; Modal: `TRAINKIT_TRAIN_MAX_ATTEMPTS`
    for training). The train job counts attempts on the run record against it, so a
    failed attempt leaves the run resumable for the next one and only the last fails it.
    """

    settings: Settings
    provider: str
    call_id: str
    kv_factory: Callable[[str], KVStore]
    volume_paths: Mapping[str, Path]
    commit: Callable[[str], None] = _no_op
    reload: Callable[[str], None] = _no_op
    max_attempts: int = 1
    rank_context: str = ""
    launch_ranks: Callable[..., str | None] | None = None
    node_rank: int = 0
    node_addresses: tuple[str, ...] = ()
    _kv_cache: dict[str, KVStore] = field(default_factory=dict, repr=False)

    def kv(self, namespace: str) -> KVStore:
        if namespace not in self._kv_cache:
            self._kv_cache[namespace] = self.kv_factory(namespace)
        return self._kv_cache[namespace]

    def path(self, kind: str) -> Path:
        if kind not in self.volume_paths:
            raise UsageError(f"unknown volume kind {kind!r}; expected one of {', '.join(VOLUME_KINDS)}")
        return self.volume_paths[kind]
