"""A `KVStore` that is slow on purpose, for tests and benchmarks.

`SlowKV(inner, delay_s)` waits `delay_s` before every call to `inner`, as a store
across a network (a Modal Dict) or under load would, and counts the calls by the
name of the thread that made them, so a test can show that a code path (a training
step) never waits for the store.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from trainkit_core.plugins.hookspecs import KVStore
from trainkit_core.toolkit.kv_values import get_many, get_many_text


class SlowKV:
    """`inner`, `delay_s` slower on every call; `calls` counts them by thread name."""

    def __init__(self, inner: KVStore, delay_s: float = 0.05, calls: Counter[str] | None = None) -> None:
        self.inner = inner
        self.namespace = inner.namespace
        self.delay_s = delay_s
        self.calls: Counter[str] = calls if calls is not None else Counter()
        self._lock = threading.Lock()

    def _wait(self) -> None:
        with self._lock:
            self.calls[threading.current_thread().name] += 1
        time.sleep(self.delay_s)

    def get(self, key: str, default: Any = None) -> Any:
        self._wait()
        return self.inner.get(key, default)

    def put(self, key: str, value: Any) -> None:
        self._wait()
        self.inner.put(key, value)

    def put_many(self, items: Mapping[str, Any]) -> None:
        self._wait()
        many = getattr(self.inner, "put_many", None)
        if many is not None:
            many(items)
        else:
            for key, value in items.items():
                self.inner.put(key, value)

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        self._wait()
        return get_many(self.inner, keys)

    def get_many_text(self, keys: list[str]) -> dict[str, str]:
        self._wait()
        return get_many_text(self.inner, keys)

    def put_if_absent(self, key: str, value: Any) -> bool:
        self._wait()
        return self.inner.put_if_absent(key, value)

    def delete(self, key: str) -> bool:
        self._wait()
        return self.inner.delete(key)

    def keys(self, prefix: str = "") -> list[str]:
        self._wait()
        return self.inner.keys(prefix)

    def items(self, prefix: str = "") -> list[tuple[str, Any]]:
        self._wait()
        return self.inner.items(prefix)


def slow_factory(
    factory: Callable[[str], KVStore], delay_s: float = 0.05, calls: Counter[str] | None = None
) -> Callable[[str], KVStore]:
    """Wrap a namespace -> `KVStore` factory (a provider's ``kv``, a `JobContext`'s) in `SlowKV`s.

    One `SlowKV` per namespace, all counting into `calls`.
    """
    shared: Counter[str] = calls if calls is not None else Counter()
    made: dict[str, KVStore] = {}

    def kv(namespace: str) -> KVStore:
        if namespace not in made:
            made[namespace] = SlowKV(factory(namespace), delay_s, shared)
        return made[namespace]

    kv.calls = shared  # type: ignore[attr-defined]
    return kv
