"""The first writers of a fresh store, started together.

Switching a new SQLite file to WAL needs the file to itself, and SQLite refuses the other
openers at once rather than after its busy timeout. Shared by the tests of the local store
and of the sqlvol fixture provider, which both met that race.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any


def first_writers_all_succeed(open_kv: Callable[[int], Any], *, rounds: int, writers: int = 12) -> None:
    """Each round, `writers` threads open a fresh store (`open_kv(round)` names it), wait for
    each other, then each claims a key of its own; every claim must succeed and be kept."""
    for round_ in range(rounds):
        errors = _race(partial(open_kv, round_), writers)
        assert errors == [], f"round {round_}: {errors[0]}"
        assert open_kv(round_).keys() == sorted(f"k{i}" for i in range(writers))


def _race(open_kv: Callable[[], Any], writers: int) -> list[BaseException]:
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        kv = open_kv()
        start.wait()
        try:
            kv.put_if_absent(f"k{i}", i)
        except BaseException as exc:  # collected, asserted on by the caller
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
