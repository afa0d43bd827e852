"""What the conformance suite does in a second process.

``python -m trainkit_core.testing.child OP JSON`` builds the provider from the
environment (settings from ``TRAINKIT_*``, plugins from the entry points), runs one
operation and prints its JSON answer on the last line of stdout. A second process is
the only honest way to check that state is durable and shared, and that a job call
outlives the process that started it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainkit_core.errors import TrainkitError
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings


def _wait_for_go(go_file: str | None) -> None:
    """Block until `go_file` exists, so several children start writing at once."""
    if not go_file:
        return
    deadline = time.monotonic() + 60
    while not Path(go_file).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{go_file} never appeared")
        time.sleep(0.005)


def kv_write(provider: Provider, namespace: str, worker: int, count: int, go_file: str | None = None) -> Any:
    """Write `count` keys of our own, and race the other workers for `count` shared claims."""
    kv = provider.kv(namespace)
    _wait_for_go(go_file)
    won = []
    for i in range(count):
        kv.put(f"w{worker}-{i:04d}", {"worker": worker, "i": i})
        if kv.put_if_absent(f"claim-{i:04d}", worker):
            won.append(i)
    return {"won": won}


def kv_get(provider: Provider, namespace: str, key: str) -> Any:
    return provider.kv(namespace).get(key)


def kv_put(provider: Provider, namespace: str, key: str, value: Any) -> Any:
    provider.kv(namespace).put(key, value)
    return True


def volume_read(provider: Provider, kind: str, path: str) -> Any:
    return provider.volume(kind).read_bytes(path).decode()


def volume_write(provider: Provider, kind: str, path: str, text: str) -> Any:
    provider.volume(kind).write_bytes(path, text.encode())
    return True


def spawn(provider: Provider, function: str, kwargs: dict[str, Any]) -> Any:
    """Start a call and exit at once: the call must outlive us."""
    return provider.spawn(function, **kwargs).call_id


def call_wait(provider: Provider, call_id: str, timeout: float) -> Any:
    handle = provider.call(call_id)
    try:
        return {"result": handle.wait(timeout=timeout), "state": handle.status().state}
    except TrainkitError as exc:
        return {"error": f"{type(exc).__name__}: {exc.message}", "state": handle.status().state}


def call_status(provider: Provider, call_id: str) -> Any:
    status = provider.call(call_id).status()
    return {"state": status.state, "error": status.error}


OPERATIONS: dict[str, Callable[..., Any]] = {
    f.__name__: f for f in (kv_write, kv_get, kv_put, volume_read, volume_write, spawn, call_wait, call_status)
}


def main() -> None:
    operation, raw = sys.argv[1], sys.argv[2]
    args = json.loads(raw)
    provider = get_provider(args.pop("provider"), Settings.from_env())
    answer = OPERATIONS[operation](provider, **args)
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
