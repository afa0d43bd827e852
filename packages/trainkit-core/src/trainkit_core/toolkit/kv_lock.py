"""A lock in a key-value store, for read-modify-writes of records and files that several writers share.

Neither a `KVStore` nor a `Volume` can compare-and-swap, and the writers of one
record or file may be threads of the API, CLI processes and a job on another
machine. ``put_if_absent`` is the one atomic write every store has, so a writer
takes ``<key>`` with it, does its read-modify-write, and deletes the key. A holder
that died is detected: on this machine by its process id, elsewhere by age
(`stale_s`), so a killed writer never blocks the others for good.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trainkit_core.errors import ConflictError
from trainkit_core.plugins.hookspecs import KVStore

logger = logging.getLogger(__name__)

#: The key-value namespace of locks that are not a dataset sync's.
LOCKS_NAMESPACE = "locks"
#: Tokens of the locks this process holds now (threads of one process lock each other out too).
_HELD: set[str] = set()


@contextmanager
def kv_lock(
    kv: KVStore | None,
    key: str,
    *,
    busy: str,
    wait_s: float = 30.0,
    stale_s: float = 120.0,
    hint: str = "try again in a moment",
) -> Iterator[None]:
    """Hold `key` in `kv` for the block; wait up to `wait_s` for a live holder, then `ConflictError(busy)`.

    The error names neither the holder's host nor its process id: it may reach a web
    client. They are logged.
    """
    if kv is None:
        yield
        return
    token = uuid.uuid4().hex
    mine = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": time.time(), "token": token}
    deadline = time.monotonic() + wait_s
    _HELD.add(token)
    try:
        with _taken(kv, key, mine, busy=busy, hint=hint, deadline=deadline, stale_s=stale_s):
            yield
    finally:
        _HELD.discard(token)


@contextmanager
def _taken(
    kv: KVStore, key: str, mine: dict[str, Any], *, busy: str, hint: str, deadline: float, stale_s: float
) -> Iterator[None]:
    pause = 0.005
    while not kv.put_if_absent(key, mine):
        holder = kv.get(key)
        if holder is None:
            continue  # released between the two calls
        if is_stale(holder if isinstance(holder, dict) else {}, stale_s):
            logger.warning("taking over the lock %s from a dead holder %s", key, holder)
            if kv.get(key) == holder:
                kv.delete(key)
            continue
        if time.monotonic() >= deadline:
            logger.info("lock %s is held by %s", key, holder)
            raise ConflictError(busy, hint=hint)
        time.sleep(pause)
        pause = min(pause * 2, 0.2)
    try:
        yield
    finally:
        if kv.get(key) == mine:
            kv.delete(key)


def is_stale(holder: dict[str, Any], stale_s: float) -> bool:
    """A holder on this machine whose process is gone, or one elsewhere older than `stale_s`.

    A lock of this very process that no block of it holds any more is stale too: its
    release failed (the store refused the delete), and waiting for ourselves would
    block every later writer of this process.
    """
    if holder.get("host") == socket.gethostname():
        pid = int(holder.get("pid") or 0)
        if pid == os.getpid() and holder.get("token"):
            return holder["token"] not in _HELD
        return not pid_alive(pid)
    return time.time() - float(holder.get("started_at") or 0) > stale_s


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
