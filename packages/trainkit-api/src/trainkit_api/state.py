"""What every request shares: settings, the provider, the run store.

Built once by `create_app` and kept on ``app.state.trainkit``; routes get it through
the `get_state` dependency, never from a global, so two apps with different settings
live side by side (as the tests do).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from fastapi import Request

from trainkit_core.hookspecs import KVStore
from trainkit_core.provider import Provider
from trainkit_core.runs import RunStore, TrainingRun
from trainkit_core.settings import Settings


@dataclass
class ApiState:
    settings: Settings
    provider: Provider
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
        if reconcile and not run.done():
            from trainkit_core.reconcile import reconcile_run

            reconcile_run(run)
        return run


def get_state(request: Request) -> ApiState:
    return request.app.state.trainkit  # type: ignore[no-any-return]
