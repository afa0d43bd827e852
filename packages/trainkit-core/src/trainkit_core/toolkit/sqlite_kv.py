"""The local key-value store: one SQLite file in WAL mode, shared by every process."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainkit_core.errors import UsageError, out_of_space, out_of_space_error
from trainkit_core.toolkit.kv_values import check_key, dump_value

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID
"""


#: How long a writer waits for the others before SQLite says the database is locked.
BUSY_TIMEOUT_S = 60.0


def db_path(home: Path) -> Path:
    return Path(home) / "kv.sqlite3"


def _set_up(conn: sqlite3.Connection) -> None:
    """Switch a new connection to WAL, retrying while another connection holds the file.

    Turning a new database file to WAL needs it to itself, and SQLite answers "database
    is locked" at once there, without waiting its busy timeout: the threads of a fresh
    home's first requests (six eval uploads at once) failed so. Each retries instead.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


class LocalKV:
    """A namespace of the SQLite store. Safe across threads and processes.

    Each process opens its own connection (a connection must not cross a fork);
    writers wait for each other through SQLite's busy timeout.
    """

    def __init__(self, home: Path, namespace: str) -> None:
        if not namespace or not isinstance(namespace, str):
            raise UsageError("key-value namespace must be a non-empty string")
        self.namespace = namespace
        self.path = db_path(home)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def __repr__(self) -> str:
        return f"<LocalKV {self.namespace} in {self.path}>"

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            _set_up(conn)
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a full disk is an `OutOfSpaceError` naming the database."""
        try:
            with self._lock:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        except (sqlite3.OperationalError, OSError) as exc:
            if out_of_space(exc):
                raise out_of_space_error(f"the key-value store ({self.namespace})", str(self.path)) from None
            raise

    _check_key = staticmethod(check_key)
    _dump = staticmethod(dump_value)

    def get(self, key: str, default: Any = None) -> Any:
        self._check_key(key)
        with self._lock:
            row = (
                self._connection()
                .execute("SELECT value FROM kv WHERE namespace=? AND key=?", (self.namespace, key))
                .fetchone()
            )
        return default if row is None else json.loads(row[0])

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        """The values of several keys in one query (missing keys are left out)."""
        return {key: json.loads(text) for key, text in self.get_many_text(keys).items()}

    def get_many_text(self, keys: list[str]) -> dict[str, str]:
        """Like `get_many`, with each value as its stored JSON text, not decoded."""
        found: dict[str, str] = {}
        for start in range(0, len(keys), 500):  # SQLite's limit on bound parameters
            chunk = [self._check_key(key) for key in keys[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                rows = (
                    self._connection()
                    .execute(
                        f"SELECT key, value FROM kv WHERE namespace=? AND key IN ({marks})", (self.namespace, *chunk)
                    )
                    .fetchall()
                )
            found.update(rows)
        return found

    def put(self, key: str, value: Any) -> None:
        self._check_key(key)
        data = self._dump(value)
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", (self.namespace, key, data))

    def put_many(self, items: Mapping[str, Any]) -> None:
        """Write several keys in one transaction (readers see all of them or none)."""
        rows = [(self.namespace, self._check_key(key), self._dump(value)) for key, value in items.items()]
        with self._transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", rows)

    def put_if_absent(self, key: str, value: Any) -> bool:
        self._check_key(key)
        data = self._dump(value)
        with self._transaction() as conn:
            cur = conn.execute("INSERT OR IGNORE INTO kv VALUES (?, ?, ?)", (self.namespace, key, data))
            return cur.rowcount == 1

    def update(self, key: str, change: Callable[[Any], Any]) -> Any:
        """Read, change and write one value in one transaction; returns the new value."""
        self._check_key(key)
        with self._transaction() as conn:
            row = conn.execute("SELECT value FROM kv WHERE namespace=? AND key=?", (self.namespace, key)).fetchone()
            new = change(None if row is None else json.loads(row[0]))
            conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", (self.namespace, key, self._dump(new)))
            return new

    def delete(self, key: str) -> bool:
        self._check_key(key)
        with self._transaction() as conn:
            cur = conn.execute("DELETE FROM kv WHERE namespace=? AND key=?", (self.namespace, key))
            return cur.rowcount == 1

    def _select(self, columns: str, prefix: str) -> list[tuple[Any, ...]]:
        with self._lock:
            return (
                self._connection()
                .execute(
                    f"SELECT {columns} FROM kv WHERE namespace=? AND substr(key, 1, ?)=? ORDER BY key",
                    (self.namespace, len(prefix), prefix),
                )
                .fetchall()
            )

    def keys(self, prefix: str = "") -> list[str]:
        return [row[0] for row in self._select("key", prefix)]

    def items(self, prefix: str = "") -> list[tuple[str, Any]]:
        return [(row[0], json.loads(row[1])) for row in self._select("key, value", prefix)]
