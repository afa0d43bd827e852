"""What every request shares: settings, the provider, the run store.

Built once by `create_app` and kept on ``app.state.trainkit``; routes get it through
the `get_state` dependency, never from a global, so two apps with different settings
live side by side (as the tests do).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from trainkit_core.plugins.hookspecs import KVStore
from trainkit_core.plugins.provider import Provider
from trainkit_core.runs.events import EventLog
from trainkit_core.runs.training_run import RunStore, TrainingRun, history_dir
from trainkit_core.settings import Settings


@dataclass
class ApiState:
    settings: Settings
    provider: Provider
    #: Longest a generation request waits before it is answered 202 (None: until done).
    answer_within_s: float | None = None
    _kv: dict[str, KVStore] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _store: RunStore | None = field(default=None, repr=False)

    @property
    def token(self) -> str | None:
        secret = self.settings.api.api_token
        return secret.get_secret_value() if secret is not None else None

    def kv(self, namespace: str) -> KVStore:
        """One store object per namespace for the app's life (each opens a connection)."""
        with self._lock:
            if namespace not in self._kv:
                self._kv[namespace] = self.provider.kv(namespace)
            return self._kv[namespace]

    @property
    def store(self) -> RunStore:
        if self._store is None:
            self._store = RunStore(self.kv, self.provider.volume("models"), self.provider)
        return self._store

    def run(self, run_id: str, *, reconcile: bool = True) -> TrainingRun:
        """The run (`NotFoundError`/`UsageError` otherwise), fixed by the reconciler when its job is gone."""
        run = self.store.get(run_id)
        if reconcile and not run.ended():
            from trainkit_core.runs.reconcile import reconcile_run

            reconcile_run(run)
        return run


class HistoryLog:
    """The events of an ended run from its history on the models volume.

    A key-value entry can expire (a Modal Dict's after 7 idle days) while the run's
    history (`runs/<id>/events.jsonl`, written when the run ended) stays: the API then
    reads the events from there, with the same `read`/`last_seq` as an `EventLog`.
    """

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = sorted(events, key=lambda e: int(e.get("seq", 0)))

    def last_seq(self) -> int:
        return int(self.events[-1]["seq"]) if self.events else 0

    def read(self, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        found = [e for e in self.events if int(e.get("seq", 0)) > after]
        return found if limit is None else found[:limit]


def event_log(run: TrainingRun) -> EventLog | HistoryLog:
    """The run's live event log, or its history once the live log is gone."""
    log = run.events
    if log.last_seq() or not run.ended():
        return log
    path = f"{history_dir(run.id)}/events.jsonl"
    if not run.store.models.exists(path):
        return log
    lines = run.store.models.read_bytes(path).decode().splitlines()
    return HistoryLog([json.loads(line) for line in lines if line.strip()])


def get_state(request: Request) -> ApiState:
    return request.app.state.trainkit  # type: ignore[no-any-return]
