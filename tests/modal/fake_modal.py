"""An in-process fake of exactly the parts of the modal SDK that trainkit-modal uses.

State lives under a root folder (`FakeModal(root)`, or ``FAKE_MODAL_ROOT`` in a
worker), so several processes share it the way several clients share Modal:

- `Dict`: a SQLite table; values pickled like Modal's; `put(..., skip_if_exists=True)`
  is an atomic conditional insert; `update` writes several keys in one call; every
  call that would be a request to Modal is counted in `Dict.calls` (per Dict name and
  method), so tests can hold a code path to a number of round trips;
- `Volume`: a folder per volume; `batch_upload` applies its files when the batch
  ends (each by rename), so readers see the old file or the new one;
- `App` / `Image` / `Secret` / `Retries` / `enter` / `method` / `asgi_app`: record
  what `build_app` declares; `App.deploy` writes the deployed app's function names;
  `App.lookup` / `info` / `stop` read and change that record;
- `Function.from_name(...).spawn` / `Cls.from_name(...)().run.spawn`: start a
  detached worker process (the "container") that rebuilds the app with this fake,
  as Modal's container imports the app, and runs the declared function;
  `FunctionCall.from_id(...).get(timeout=0)` raises `TimeoutError` while it runs,
  `cancel` kills it.

Signatures follow modal 1.6.4 (keyword names included), so a wrong argument name in
trainkit-modal fails here too.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import io
import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any, ClassVar


def _root() -> Path:
    return Path(os.environ["FAKE_MODAL_ROOT"])


# --------------------------------------------------------------------------- exceptions


class exception:
    class Error(Exception):
        pass

    class AuthError(Error):
        pass

    class NotFoundError(Error):
        pass

    class InvalidError(Error):
        pass

    class ConnectionError(Error):
        pass

    class TimeoutError(Error):
        pass

    class OutputExpiredError(TimeoutError):
        pass

    class FunctionTimeoutError(TimeoutError):
        pass

    class RemoteError(Error):
        pass

    class ExecutionError(Error):
        pass

    # The service's own failures (modal 1.6.4, `modal/exception.py`; there they also derive
    # from `_GRPCErrorWrapper`, a `grpclib.GRPCError`, which trainkit never catches by).
    # modal's client does not retry `ServiceError` nor `ResourceExhaustedError` (a rate limit).
    class InternalError(Error):
        pass

    class ResourceExhaustedError(Error):
        pass

    class ServiceError(Error):
        pass

    class InternalFailure(Error):
        pass

    class InputCancellation(BaseException):
        pass


def current_function_call_id() -> str | None:
    return os.environ.get("FAKE_MODAL_CALL_ID")


@contextlib.contextmanager
def enable_output() -> Iterator[None]:
    yield


# --------------------------------------------------------------------------- Dict


_connections: dict[tuple[int, str], sqlite3.Connection] = {}
_db_lock = threading.Lock()


def _set_up(conn: sqlite3.Connection) -> None:
    """WAL and the tables; retried, since turning a new file to WAL says "locked" at once to other openers.

    A real Dict never refuses its first use, so the fake must not either.
    """
    for attempt in range(400):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS d (name TEXT, key BLOB, value BLOB, touched REAL, PRIMARY KEY (name, key))"
            )
            conn.execute("CREATE TABLE IF NOT EXISTS names (name TEXT PRIMARY KEY)")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 399:
                raise
            time.sleep(0.05)


@contextlib.contextmanager
def _db() -> Iterator[sqlite3.Connection]:
    """This process's connection to the shared store (one per process and root), used under a lock."""
    root = _root()
    with _db_lock:
        conn = _connections.get((os.getpid(), str(root)))
        if conn is None:
            root.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(root / "dicts.sqlite3", timeout=60, isolation_level=None, check_same_thread=False)
            _set_up(conn)
            _connections[(os.getpid(), str(root))] = conn
        yield conn


_NO_DEFAULT = object()

#: Modal 1.6.4 (`modal/dict.py`): "An individual Dict entry will expire after 7 days of
#: inactivity (no reads or writes)". The fake drops an entry idle that long at the next request.
DICT_ENTRY_TTL_S = 7 * 24 * 3600.0


def fake_now() -> float:
    """The fake cloud's clock: the real time plus what `advance_clock` added (shared by every process)."""
    offset = _root() / "clock_offset"
    return time.time() + (float(offset.read_text()) if offset.exists() else 0.0)


def advance_clock(seconds: float) -> None:
    """Let `seconds` pass for the fake cloud (Dict entries age), in this process and its subprocesses."""
    offset = _root() / "clock_offset"
    before = float(offset.read_text()) if offset.exists() else 0.0
    _root().mkdir(parents=True, exist_ok=True)
    offset.write_text(repr(before + seconds))


class Dict:
    #: (Dict name, method) -> how many requests this process made; tests reset it.
    calls: ClassVar[collections.Counter[tuple[str, str]]] = collections.Counter()

    #: The fake clock at the request under way (set under the store's lock, see `_conn`).
    _now: float = 0.0

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    def count_calls(cls, prefix: str = "") -> int:
        """Requests made so far to the Dicts whose names start with `prefix`."""
        return sum(n for (name, _), n in cls.calls.items() if name.startswith(prefix))

    @staticmethod
    def from_name(
        name: str, *, environment_name: str | None = None, create_if_missing: bool = False, client: Any = None
    ) -> Dict:
        if create_if_missing:
            with _db() as conn:
                conn.execute("INSERT OR IGNORE INTO names VALUES (?)", (name,))
        return Dict(name)

    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        caller = sys._getframe(2).f_code.co_name  # the public method: one request to Modal
        Dict.calls[(self.name, caller)] += 1
        _client_fault(f"Dict.{caller}:{self.name}")
        with _db() as conn:
            if conn.execute("SELECT 1 FROM names WHERE name=?", (self.name,)).fetchone() is None:
                raise exception.NotFoundError(f"Dict '{self.name}' not found")
            self._now = fake_now()
            conn.execute("DELETE FROM d WHERE name=? AND touched < ?", (self.name, self._now - DICT_ENTRY_TTL_S))
            yield conn

    def get(self, key: Any, default: Any | None = None) -> Any:
        with self._conn() as conn:
            row = conn.execute("SELECT value FROM d WHERE name=? AND key=?", (self.name, pickle.dumps(key))).fetchone()
            conn.execute("UPDATE d SET touched=? WHERE name=? AND key=?", (self._now, self.name, pickle.dumps(key)))
        return default if row is None else pickle.loads(row[0])

    def put(self, key: Any, value: Any, *, skip_if_exists: bool = False) -> bool:
        verb = "INSERT OR IGNORE" if skip_if_exists else "INSERT OR REPLACE"
        with self._conn() as conn:
            row = (self.name, pickle.dumps(key), pickle.dumps(value), self._now)
            cur = conn.execute(f"{verb} INTO d VALUES (?, ?, ?, ?)", row)
            return cur.rowcount == 1

    def update(self, other: Any = None, /, **kwargs: Any) -> None:
        contents = dict(other or {})
        contents.update(kwargs)
        with self._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT OR REPLACE INTO d VALUES (?, ?, ?, ?)",
                [(self.name, pickle.dumps(k), pickle.dumps(v), self._now) for k, v in contents.items()],
            )
            conn.execute("COMMIT")

    def pop(self, key: Any, default: Any = _NO_DEFAULT) -> Any:
        with self._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT value FROM d WHERE name=? AND key=?", (self.name, pickle.dumps(key))).fetchone()
            conn.execute("DELETE FROM d WHERE name=? AND key=?", (self.name, pickle.dumps(key)))
            conn.execute("COMMIT")
        if row is None:
            if default is _NO_DEFAULT:
                raise KeyError(key)
            return default
        return pickle.loads(row[0])

    def contains(self, key: Any) -> bool:
        return self.get(key, _NO_DEFAULT) is not _NO_DEFAULT

    def keys(self) -> Iterator[Any]:
        with self._conn() as conn:
            rows = conn.execute("SELECT key FROM d WHERE name=?", (self.name,)).fetchall()
        return iter([pickle.loads(r[0]) for r in rows])

    def items(self) -> Iterator[tuple[Any, Any]]:
        with self._conn() as conn:
            rows = conn.execute("SELECT key, value FROM d WHERE name=?", (self.name,)).fetchall()
            conn.execute("UPDATE d SET touched=? WHERE name=?", (self._now, self.name))
        return iter([(pickle.loads(k), pickle.loads(v)) for k, v in rows])


# --------------------------------------------------------------------------- Volume


class FileEntryType:
    FILE = 1
    DIRECTORY = 2


@dataclass
class FileEntry:
    path: str
    type: int
    mtime: int
    size: int


class _Batch:
    def __init__(self, volume: Volume, force: bool) -> None:
        self.volume = volume
        self.force = force
        self.files: list[tuple[Any, str]] = []

    def put_file(self, local_file: Any, remote_path: Any, mode: int | None = None) -> None:
        remote = PurePosixPath(remote_path).as_posix()
        if remote.endswith("/"):
            raise ValueError(f"remote_path ({remote}) must refer to a file - cannot end with /")
        self.files.append((local_file, remote))

    def put_directory(self, local_path: Any, remote_path: Any, recursive: bool = True) -> None:
        local = Path(local_path)
        assert local.is_dir()
        for item in sorted(local.rglob("*") if recursive else local.glob("*")):
            if item.is_file():
                self.put_file(item, (PurePosixPath(remote_path) / item.relative_to(local).as_posix()).as_posix())

    def apply(self) -> None:
        for local, remote in self.files:
            target = self.volume._path(remote)
            if target.exists() and not self.force:
                raise FileExistsError(f"{remote} already exists")
            if target.is_dir():
                raise exception.InvalidError(f"{remote} is a directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.parent / f".upload-{uuid.uuid4().hex}"
            if isinstance(local, (str, Path)):
                tmp.write_bytes(Path(local).read_bytes())
            else:
                local.seek(0)
                tmp.write_bytes(local.read())
            os.replace(tmp, target)


class Volume:
    def __init__(self, name: str) -> None:
        self.name = name
        self.commits = 0

    @staticmethod
    def from_name(
        name: str,
        *,
        environment_name: str | None = None,
        create_if_missing: bool = False,
        version: Any = None,
        create_options: Any = None,
        client: Any = None,
    ) -> Volume:
        if create_if_missing:
            (_root() / "volumes" / name).mkdir(parents=True, exist_ok=True)
        return Volume(name)

    @property
    def root(self) -> Path:
        root = _root() / "volumes" / self.name
        if not root.is_dir():
            raise exception.NotFoundError(f"Volume '{self.name}' not found")
        return root

    def _path(self, path: str) -> Path:
        rel = PurePosixPath(path.lstrip("/"))
        assert ".." not in rel.parts, path
        return self.root / rel

    def _entry(self, item: Path) -> FileEntry:
        st = item.stat()
        kind = FileEntryType.DIRECTORY if item.is_dir() else FileEntryType.FILE
        return FileEntry(item.relative_to(self.root).as_posix(), kind, int(st.st_mtime), st.st_size)

    def listdir(self, path: str, *, recursive: bool = False) -> list[FileEntry]:
        target = self._path(path)
        if not target.exists():
            raise exception.NotFoundError(f"No such file or directory: {path}")
        if target.is_file():
            return [self._entry(target)]
        walker = target.rglob("*") if recursive else target.iterdir()
        return [self._entry(item) for item in walker if not item.name.startswith(".upload-")]

    def read_file_into_fileobj(self, path: str, fileobj: Any, progress_cb: Any = None) -> int:
        """Streams the file in 1 MiB chunks into `fileobj`; the bytes written."""
        target = self._path(path)
        if not target.is_file():
            raise FileNotFoundError(f"No such file: {path}")
        written = 0
        with open(target, "rb") as fh:
            while chunk := fh.read(1 << 20):
                fileobj.write(chunk)
                written += len(chunk)
        return written

    def read_file(self, path: str) -> Iterator[bytes]:
        target = self._path(path)
        if not target.is_file():
            raise FileNotFoundError(f"No such file: {path}")
        data = target.read_bytes()
        for start in range(0, max(len(data), 1), 1 << 20):
            yield data[start : start + (1 << 20)]

    def remove_file(self, path: str, recursive: bool = False) -> None:
        target = self._path(path)
        if not target.exists():
            raise FileNotFoundError(f"No such file or directory: {path}")
        if target.is_dir():
            if any(target.iterdir()) and not recursive:
                raise exception.InvalidError(f"{path} is a non-empty directory")
            import shutil

            shutil.rmtree(target)
        else:
            target.unlink()

    @contextlib.contextmanager
    def batch_upload(self, force: bool = False) -> Iterator[_Batch]:
        batch = _Batch(self, force)
        yield batch
        batch.apply()

    def commit(self) -> None:
        """Recorded in `volume-ops.log` (shared by all processes), so tests can see who committed."""
        self.commits += 1
        self._record_op("commit")

    def reload(self) -> None:
        """Like Modal's: refused while this process holds files of the volume open (or memory-mapped)."""
        busy = _open_files_under(self.root)
        if busy:
            self._record_op("reload-refused")
            raise RuntimeError(
                f"Volume '{self.name}': there are open files preventing the operation: path {busy[0]} is open"
            )
        self._record_op("reload")

    def _record_op(self, op: str) -> None:
        call_id = os.environ.get("FAKE_MODAL_CALL_ID", "client")
        with open(_root() / "volume-ops.log", "a") as fh:
            fh.write(f"{call_id} {op} {self.name}\n")


def _open_files_under(root: Path) -> list[str]:
    """Files under `root` this process has open or memory-mapped (read from /proc, as Modal's check does)."""
    prefix = str(root.resolve()) + os.sep
    found = []
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith(prefix):
                    found.append(target)
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip().startswith(prefix):
                found.append(parts[5].strip())
    return sorted(set(found))


# --------------------------------------------------------------------------- declarations


def create_secret(name: str, keys: list[str]) -> None:
    """What `modal secret create NAME KEY=...` does, for tests (values are not kept)."""
    path = _root() / "secrets.json"
    existing = _read_json(path) or {}
    _write_json(path, {**existing, name: sorted(keys)})


@dataclass
class Secret:
    name: str | None = None
    required_keys: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict, repr=False)

    @staticmethod
    def from_name(
        name: str, *, environment_name: str | None = None, required_keys: list[str] | None = None, client: Any = None
    ) -> Secret:
        return Secret(name=name, required_keys=list(required_keys or []))

    @staticmethod
    def from_dict(env_dict: dict[str, str | None] | None = None) -> Secret:
        return Secret(values={k: v for k, v in (env_dict or {}).items() if v is not None})


@dataclass
class Retries:
    max_retries: int
    backoff_coefficient: float = 2.0
    initial_delay: float = 1.0
    max_delay: float = 60.0


#: Stands for modal's `NON_PYTHON_FILES`, the default `ignore` of `add_local_python_source`.
_DEFAULT_IGNORE = "NON_PYTHON_FILES"


@dataclass
class Image:
    layers: list[tuple[str, Any]] = field(default_factory=list)

    @staticmethod
    def debian_slim(python_version: str | None = None, force_build: bool = False) -> Image:
        return Image([("debian_slim", python_version)])

    def uv_pip_install(
        self,
        *packages: str,
        requirements: list[str] | None = None,
        find_links: str | None = None,
        index_url: str | None = None,
        extra_index_url: str | None = None,
        pre: bool = False,
        extra_options: str = "",
        force_build: bool = False,
        uv_version: str | None = None,
        env: dict[str, str | None] | None = None,
        secrets: Any = None,
        gpu: str | None = None,
    ) -> Image:
        options = {"index_url": index_url, "extra_options": extra_options, "env": env}
        return Image([*self.layers, ("uv_pip_install", packages, options)])

    def apt_install(
        self,
        *packages: str,
        force_build: bool = False,
        env: dict[str, str | None] | None = None,
        secrets: Any = None,
        gpu: str | None = None,
    ) -> Image:
        return Image([*self.layers, ("apt_install", packages)])

    def env(self, vars: dict[str, str]) -> Image:
        return Image([*self.layers, ("env", dict(vars))])

    def add_local_python_source(self, *modules: str, copy: bool = False, ignore: Any = _DEFAULT_IGNORE) -> Image:
        return Image([*self.layers, ("add_local_python_source", modules, ignore)])

    def add_local_dir(self, local_path: Any, remote_path: str, *, copy: bool = False, ignore: Any = ()) -> Image:
        return Image([*self.layers, ("add_local_dir", (str(local_path), remote_path), ignore)])


def enter(*, snap: bool = False) -> Any:
    def mark(f: Any) -> Any:
        f._fake_enter = True
        return f

    return mark


def method(*, is_generator: bool | None = None) -> Any:
    def mark(f: Any) -> Any:
        f._fake_method = True
        return f

    return mark


def concurrent(*, max_inputs: int | None = None, target_inputs: int | None = None) -> Any:
    if max_inputs is None:
        raise exception.InvalidError("`modal.concurrent` requires `max_inputs`")

    def mark(f: Any) -> Any:
        f._fake_concurrent = max_inputs
        return f

    return mark


def clustered(*, size: int, rdma: bool = False) -> Any:
    """Like modal 1.6.4's `modal.clustered`: `size` containers scheduled together for each input."""
    if not isinstance(size, int) or size <= 0:
        raise exception.InvalidError("cluster size must be a positive integer")

    def mark(f: Any) -> Any:
        # A new object, as modal's `_PartialFunction` is: the same job function may also be
        # declared unclustered (and in clusters of other sizes).
        @functools.wraps(f)
        def clustered_function(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        clustered_function._fake_cluster_size = size  # type: ignore[attr-defined]
        return clustered_function

    return mark


class Cluster:
    """Like modal 1.6.4's `modal.Cluster`, inside a container of a clustered function only.

    The fake's cluster containers run on this host: their addresses are all 127.0.0.1
    (the scheduler sets them, with each container's rank, in its environment).
    """

    def __init__(self, rank: int, ips: list[str]) -> None:
        self._rank, self._ips = rank, ips

    @staticmethod
    def from_context() -> Cluster:
        rank, ips = os.environ.get("FAKE_MODAL_CLUSTER_RANK"), os.environ.get("FAKE_MODAL_CLUSTER_IPS")
        if rank is None or not ips:
            raise exception.InvalidError(
                "Cluster context is not initialized. This operation requires execution inside a clustered Function or Server."
            )
        return Cluster(int(rank), ips.split(","))

    def container_rank(self, container_id: str | None = None) -> int:
        return self._rank

    def container_ips(self, family: str = "ipv6") -> list[str]:
        if family not in ("ipv4", "ipv6"):
            raise exception.InvalidError("family must be 'ipv4' or 'ipv6'.")
        return list(self._ips)


def asgi_app(*, label: str | None = None, custom_domains: Any = None, requires_proxy_auth: bool = False) -> Any:
    def mark(f: Any) -> Any:
        f._fake_asgi = True
        return f

    return mark


@dataclass
class Declared:
    name: str
    kind: str
    target: Any
    options: dict[str, Any]
    app: App | None = None

    #: The handle `App.run` hydrated from the ephemeral app's layout (None outside `run`).
    handle: Any = None

    def get_web_url(self) -> str | None:
        """Only while the app runs (`App.run`), like an ephemeral app's temporary URL."""
        if self.app is None or not self.app.running:
            raise exception.ExecutionError("the app is not running")
        return f"https://fake--{self.app.name}-{self.name}-dev.modal.run"

    def _hydrated(self) -> Any:
        """Like modal: a declared object calls its app's function only once `App.run` hydrated it."""
        if self.app is None or not self.app.running or self.handle is None:
            raise exception.ExecutionError(f"{self.kind} {self.name} has not been hydrated: its app is not running")
        return self.handle

    def spawn(self, *args: Any, **kwargs: Any) -> FunctionCall:
        return self._hydrated().spawn(*args, **kwargs)  # type: ignore[no-any-return]

    def with_options(self, **options: Any) -> Any:
        return self._hydrated().with_options(**options)

    def __call__(self) -> Any:
        return self._hydrated()()


class LocalEntrypoint:
    """Like modal's `_LocalEntrypoint`: calling it calls the function, in this process."""

    def __init__(self, raw_f: Any, app: App) -> None:
        self.raw_f, self.app = raw_f, app

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.raw_f(*args, **kwargs)


_FUNCTION_OPTIONS = {
    "image", "env", "secrets", "gpu", "serialized", "volumes", "cpu", "memory", "min_containers",
    "max_containers", "scaledown_window", "retries", "timeout", "startup_timeout", "name", "nonpreemptible",
    "single_use_containers", "include_source", "region", "cloud",
}  # fmt: skip


class App:
    def __init__(self, name: str | None = None, *, tags: Any = None, image: Any = None, secrets: Any = (), volumes: Any = None, include_source: bool = True) -> None:  # fmt: skip
        self.name = name
        self.declared: dict[str, Declared] = {}
        self.app_id: str | None = None
        self.running = False
        self.runs = 0
        self._local_entrypoints: dict[str, LocalEntrypoint] = {}

    def local_entrypoint(self, *, name: str | None = None) -> Any:
        """Like modal 1.6.4: registered under `name` (default the function's qualified name), unique."""

        def register(raw_f: Any) -> LocalEntrypoint:
            if "<locals>" in raw_f.__qualname__:  # modal's FunctionSourceInfo: LocalFunctionError
                raise exception.InvalidError("Modal can only import functions defined in global scope")
            tag = name if name is not None else raw_f.__qualname__
            if tag in self._local_entrypoints:
                raise exception.InvalidError(f"Duplicate local entrypoint name: {tag}.")
            self._local_entrypoints[tag] = LocalEntrypoint(raw_f, self)
            return self._local_entrypoints[tag]

        return register

    def function(self, **options: Any) -> Any:
        unknown = set(options) - _FUNCTION_OPTIONS
        assert not unknown, f"not a modal 1.6 function option: {unknown}"

        def register(f: Any) -> Declared:
            name = options.get("name") or f.__name__
            self.declared[name] = Declared(name, "function", f, options, self)
            return self.declared[name]

        return register

    def cls(self, **options: Any) -> Any:
        unknown = set(options) - (_FUNCTION_OPTIONS - {"name"})
        assert not unknown, f"not a modal 1.6 cls option: {unknown}"

        def register(user_cls: type) -> Declared:
            self.declared[user_cls.__name__] = Declared(user_cls.__name__, "class", user_cls, options, self)
            return self.declared[user_cls.__name__]

        return register

    #: The app of this process when it is a container (modal's `_App._container_app`).
    _container_app: ClassVar[App | None] = None

    @classmethod
    def _get_container_app(cls) -> App | None:
        """Like modal 1.6.4: the app this container runs in, None outside a container."""
        return cls._container_app

    def _init_container(self, client: Any, running_app: RunningApp) -> None:
        """Like modal's container entrypoint: this process becomes a container of `running_app`'s app."""
        self.app_id, self._running_app, self._client = running_app.app_id, running_app, client
        App._container_app = self

    def _layout(self) -> dict[str, Any]:
        """Ids of the declared objects: a class is its service function `<Class>.*` and a class id."""
        functions = {
            (f"{n}.*" if d.kind == "class" else n): "fu-" + uuid.uuid4().hex[:12] for n, d in self.declared.items()
        }
        classes = {n: "cs-" + uuid.uuid4().hex[:12] for n, d in self.declared.items() if d.kind == "class"}
        return {"functions": functions, "classes": classes}

    @contextlib.contextmanager
    def run(self, *, name: str | None = None, client: Any = None, detach: bool = False, interactive: bool = False, environment_name: str | None = None) -> Iterator[App]:  # fmt: skip
        """An ephemeral app: running inside the block only, found by its id, never by name (like Modal)."""
        self._check_secrets()
        self.running, self.runs = True, self.runs + 1
        self.app_id = "ap-" + uuid.uuid4().hex[:20]
        record = {"name": self.name, "app_id": self.app_id, "state": "ephemeral", "version": 0, "deployed_at": time.time()}  # fmt: skip
        layout = self._layout()
        _write_json(_app_id_path(self.app_id), {**record, **layout, "retries": {}, "single_use": []})
        self._hydrate_declared(layout)
        try:
            yield self
        finally:
            self.running = False
            for declared in self.declared.values():
                declared.handle = None
            _write_json(_app_id_path(self.app_id), {**_read_json(_app_id_path(self.app_id)), "state": "stopped"})

    def _hydrate_declared(self, layout: dict[str, Any]) -> None:
        """Like modal's `app.run()` in the process that runs it: each declared object gets its ephemeral id."""
        for name, declared in self.declared.items():
            if declared.kind == "class":
                cls = _RemoteCls(str(self.name), name, {})
                cls._class_service_function._hydrate(layout["functions"][f"{name}.*"], None, {})
                cls._hydrate(layout["classes"][name], None, {})
                declared.handle = cls
            else:
                function = _RemoteFunction(str(self.name), name)
                function._hydrate(layout["functions"][name], None, {})
                declared.handle = function

    def _check_secrets(self) -> None:
        """Like Modal at deploy and run: a named secret must exist and hold its required keys."""
        existing = _read_json(_root() / "secrets.json") or {}
        for declared in self.declared.values():
            for secret in declared.options.get("secrets") or []:
                if secret.name is None:
                    continue
                if secret.name not in existing:
                    raise exception.NotFoundError(f"Secret '{secret.name}' not found in environment 'main'")
                missing = [k for k in secret.required_keys if k not in existing[secret.name]]
                if missing:
                    raise exception.InvalidError(f"Secret '{secret.name}' is missing required keys: {missing}")

    def deploy(self, *, name: str | None = None, environment_name: str | None = None, tag: str = "", client: Any = None, strategy: str = "rolling") -> App:  # fmt: skip
        """Like Modal: a class is deployed as its service function `<Class>.*`; a stopped app's name gets a new app."""
        self._check_secrets()
        app_name = name or self.name
        record = _read_json(_app_path(app_name)) or {"version": 0}
        if record.get("state") == "stopped":
            record = {"version": 0}
        layout = self._layout()
        retries = {}
        for n, d in self.declared.items():
            policy = d.options.get("retries")
            retries[n] = policy.max_retries if isinstance(policy, Retries) else (policy or 0)
        self.app_id = record.get("app_id") or "ap-" + uuid.uuid4().hex[:20]
        _write_app(
            {
                "name": app_name,
                "app_id": self.app_id,
                "state": "deployed",
                "version": record["version"] + 1,
                "deployed_at": time.time(),
                **layout,
                "retries": retries,
                "single_use": sorted(n for n, d in self.declared.items() if d.options.get("single_use_containers")),
                "clusters": {
                    n: d.target._fake_cluster_size
                    for n, d in self.declared.items()
                    if getattr(d.target, "_fake_cluster_size", 1) > 1
                },
            }
        )
        return self

    @staticmethod
    def lookup(name: str, *, client: Any = None, environment_name: str | None = None, create_if_missing: bool = False) -> AppHandle:  # fmt: skip
        """By name: a deployed app only. By app id (`ap-...`): any app, stopped ones included (modal 1.6.4)."""
        if name.startswith("ap-"):
            if _read_json(_app_id_path(name)) is None:
                raise exception.NotFoundError(f"App '{name}' not found")
            return AppHandle(name)
        record = _read_json(_app_path(name))
        if record is None or record["state"] == "stopped":
            raise exception.NotFoundError(f"App '{name}' not found")
        return AppHandle(record["app_id"])


@dataclass
class RunningApp:
    """modal.running_app.RunningApp (1.6.4): what a container knows of its own app."""

    app_id: str
    function_ids: dict[str, str] = field(default_factory=dict)
    class_ids: dict[str, str] = field(default_factory=dict)
    object_handle_metadata: dict[str, Any] = field(default_factory=dict)


def enter_container(app_id: str, *, name: str | None = None) -> App:
    """Make this process a container of app `app_id` (deployed or ephemeral), as Modal's entrypoint does.

    Like a serialized function's container, the app object is a fresh one (modal's
    `get_active_app_fallback`), hydrated from the app's layout; `App._container_app = None` leaves.
    """
    record = _read_json(_app_id_path(app_id))
    ids = {**record["functions"], **record["classes"]}
    running = RunningApp(
        app_id,
        function_ids=dict(record["functions"]),
        class_ids=dict(record["classes"]),
        object_handle_metadata={object_id: {"tag": tag} for tag, object_id in ids.items()},
    )
    app = App(name)
    app._init_container(client=object(), running_app=running)
    return app


class _Synchronizer:
    """modal's synchronizer: the fake has no wrapper objects, so translating in is the identity."""

    @staticmethod
    def _translate_in(obj: Any) -> Any:
        return obj


#: `modal._utils.async_utils.synchronizer`, the path trainkit_modal.own_app reads.
_utils = SimpleNamespace(async_utils=SimpleNamespace(synchronizer=_Synchronizer()))


def _app_path(name: str | None) -> Path:
    return _root() / "apps" / f"{name}.json"


def _app_id_path(app_id: str) -> Path:
    return _root() / "apps" / "by-id" / f"{app_id}.json"


def _write_app(record: dict[str, Any]) -> None:
    """The app under its name (the current one) and under its id (every app ever deployed)."""
    _write_json(_app_id_path(record["app_id"]), record)
    _write_json(_app_path(record["name"]), record)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class AppHandle:
    def __init__(self, app_id: str) -> None:
        self.app_id = app_id

    def info(self, refresh: bool = False) -> Any:
        from datetime import datetime, timezone
        from types import SimpleNamespace

        record = _read_json(_app_id_path(self.app_id))
        lifecycle = SimpleNamespace(
            state=SimpleNamespace(value=record["state"]),
            version=record["version"],
            deployed_at=datetime.fromtimestamp(record["deployed_at"], tz=timezone.utc),
            deployed_by="fake-user",
        )
        return SimpleNamespace(app_id=record["app_id"], lifecycle=lifecycle, functions=dict(record["functions"]))

    def get_dashboard_url(self) -> str:
        return f"https://modal.com/id/{self.app_id}"

    def stop(self, *, client: Any = None) -> None:
        record = _read_json(_app_id_path(self.app_id))
        _write_app({**record, "state": "stopped"})


# --------------------------------------------------------------------------- calls


def _call_path(call_id: str) -> Path:
    return _root() / "calls" / f"{call_id}.json"


def _deployed_function(app_name: str, name: str) -> dict[str, Any]:
    """The deployed app's record, when it has function (or class) `name`."""
    record = _read_json(_app_path(app_name))
    if record is None or record["state"] != "deployed" or not {name, f"{name}.*"} & set(record["functions"]):
        raise exception.NotFoundError(f"Lookup failed for Function '{name}' from the '{app_name}' app")
    return record  # type: ignore[no-any-return]


_WITH_OPTIONS = {"cpu", "memory", "gpu", "env", "secrets", "volumes", "retries", "max_containers", "buffer_containers", "scaledown_window", "timeout", "region", "cloud", "routing_region"}  # fmt: skip


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = set(options) - _WITH_OPTIONS
    assert not unknown, f"not a modal 1.6 with_options argument: {unknown}"
    return options


def _app_of_function(function_id: str) -> dict[str, Any]:
    """The running app (deployed or ephemeral, any version) that holds function id `function_id`."""
    for path in sorted((_root() / "apps" / "by-id").glob("*.json")):
        record = _read_json(path)
        if function_id in record["functions"].values() and record["state"] in ("deployed", "ephemeral"):
            return record  # type: ignore[no-any-return]
    raise exception.NotFoundError(f"Function '{function_id}' not found")


def _start_call(
    app_name: str,
    name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    options: dict[str, Any] | None = None,
    function_id: str | None = None,
) -> FunctionCall:
    """A call of function (or class) `name`: of the hydrated `function_id`'s app, else the app deployed as `app_name`."""
    app = _app_of_function(function_id) if function_id else _deployed_function(app_name, name)
    call_id = "fc-" + uuid.uuid4().hex[:24]
    record = {"app": app_name, "app_id": app["app_id"], "name": name, "state": "pending", "args": args, "kwargs": kwargs}  # fmt: skip
    policy = {
        "max_retries": app.get("retries", {}).get(name, 0),
        "single_use": name in app.get("single_use", []),
        "cluster_size": app.get("clusters", {}).get(name, 1),
    }
    _write_json(_call_path(call_id), {**record, "options": options or {}, "policy": policy, "attempts": []})
    proc = _python_child("scheduler_main", call_id, stdout=subprocess.DEVNULL, start_new_session=True)
    _pid_path(call_id).write_text(str(proc.pid))  # a file of its own: the scheduler rewrites the record
    return FunctionCall(call_id)


def _python_child(entry: str, call_id: str, **popen: Any) -> subprocess.Popen[bytes]:
    """A child process running `fake_modal.<entry>()` for call `call_id`, its stderr in the call's log."""
    env = {**os.environ, "FAKE_MODAL_ROOT": str(_root()), "FAKE_MODAL_CALL_ID": call_id, **popen.pop("env", {})}
    here = str(Path(__file__).resolve().parent)
    # Every process of the container (a rank of a run on several GPUs) imports this fake as modal.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(here) / "fake_sdk"), env.get("PYTHONPATH", "")) if p)
    with open(_root() / "calls" / f"{call_id}.log", "ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import sys; sys.path.insert(0, {here!r}); import fake_modal; fake_modal.{entry}()",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=log,
            # Modal's logs hold what a container prints on stdout and stderr alike.
            **{**popen, "stdout": log if popen.get("stdout") == "log" else popen.get("stdout")},
        )


def _pid_path(call_id: str) -> Path:
    return _root() / "calls" / f"{call_id}.pid"


def _pid(call_id: str) -> int | None:
    try:
        return int(_pid_path(call_id).read_text())
    except (OSError, ValueError):
        return None


def _check_hydration(object_id: str, prefix: str, metadata: Any) -> None:
    """Like modal's `_Object._hydrate`: the id's type must match; the metadata comes from the app's layout."""
    assert object_id.startswith(prefix), f"can not hydrate {prefix} object with {object_id}"
    assert metadata is not None, f"no handle metadata for {object_id}"


class _RemoteFunction:
    def __init__(self, app_name: str, name: str, options: dict[str, Any] | None = None) -> None:
        self.app_name = app_name
        self.name = name
        self.options = options or {}
        self.object_id: str | None = None  # set by `_hydrate`: then it never looks its app up by name

    def _hydrate(self, object_id: str, client: Any, metadata: Any) -> None:
        _check_hydration(object_id, "fu-", metadata)
        self.object_id = object_id

    def with_options(self, **options: Any) -> _RemoteFunction:
        copy = _RemoteFunction(self.app_name, self.name, {**self.options, **_check_options(options)})
        copy.object_id = self.object_id
        return copy

    def spawn(self, *args: Any, **kwargs: Any) -> FunctionCall:
        return _start_call(self.app_name, self.name, list(args), kwargs, self.options, self.object_id)

    def get_web_url(self) -> str | None:
        _deployed_function(self.app_name, self.name)
        return f"https://fake--{self.app_name}-{self.name}.modal.run"


class Function:
    @staticmethod
    def from_name(app_name: str, name: str, *, version: int | None = None, environment_name: str | None = None, client: Any = None) -> _RemoteFunction:  # fmt: skip
        return _RemoteFunction(app_name, name)


class _RemoteMethod:
    def __init__(self, cls: _RemoteCls, method: str) -> None:
        self.cls, self.method = cls, method

    def spawn(self, *args: Any, **kwargs: Any) -> FunctionCall:
        kwargs = {**kwargs, "__method__": self.method}
        service = self.cls._class_service_function.object_id
        return _start_call(self.cls.app_name, self.cls.name, list(args), kwargs, self.cls.options, service)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.spawn(*args, **kwargs).get(timeout=120)

    def remote_gen(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        yield from self.spawn(*args, **kwargs).get(timeout=120)  # the worker collected the items


class _RemoteCls:
    def __init__(self, app_name: str, name: str, options: dict[str, Any] | None = None) -> None:
        self.app_name, self.name, self.options = app_name, name, options or {}
        self._class_service_function = _RemoteFunction(app_name, f"{name}.*")
        self.object_id: str | None = None

    def _hydrate(self, object_id: str, client: Any, metadata: Any) -> None:
        """Like modal 1.6.4 (`_Cls._hydrate_metadata`): the service function is hydrated first."""
        _check_hydration(object_id, "cs-", metadata)
        assert self._class_service_function.object_id is not None, "the class's service function is not hydrated"
        self.object_id = object_id

    def with_options(self, **options: Any) -> _RemoteCls:
        copy = _RemoteCls(self.app_name, self.name, {**self.options, **_check_options(options)})
        copy._class_service_function, copy.object_id = self._class_service_function, self.object_id
        return copy

    def __call__(self) -> Any:
        outer = self

        class Instance:
            def __getattr__(self, method: str) -> _RemoteMethod:
                return _RemoteMethod(outer, method)

        return Instance()


class Cls:
    @staticmethod
    def from_name(app_name: str, name: str, *, version: int | None = None, environment_name: str | None = None, client: Any = None) -> _RemoteCls:  # fmt: skip
        return _RemoteCls(app_name, name)


class _CallLogs:
    def __init__(self, call_id: str) -> None:
        self.call_id = call_id

    def tail(self, entries: int = 100, *, source: str | None = None) -> Iterator[Any]:
        from types import SimpleNamespace

        try:
            lines = (_root() / "calls" / f"{self.call_id}.log").read_text().splitlines(keepends=True)
        except FileNotFoundError:
            lines = []
        return iter([SimpleNamespace(message=line) for line in lines[-entries:]])


class FunctionCall:
    def __init__(self, call_id: str) -> None:
        self.object_id = call_id

    @property
    def logs(self) -> _CallLogs:
        return _CallLogs(self.object_id)

    @staticmethod
    def from_id(function_call_id: str, client: Any = None) -> FunctionCall:
        return FunctionCall(function_call_id)

    def _record(self) -> dict[str, Any]:
        record = _read_json(_call_path(self.object_id))
        if record is None:
            raise exception.NotFoundError(f"Function call {self.object_id} not found")
        return record  # type: ignore[no-any-return]

    def get(self, timeout: float | None = None, *, index: int = 0) -> Any:
        _client_fault("FunctionCall.get")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self._record()
            if record["state"] == "succeeded":
                return pickle.loads(bytes.fromhex(record["result"]))
            if record["state"] == "failed":
                raise pickle.loads(bytes.fromhex(record["error"]))
            if record["state"] == "cancelled":
                raise exception.InputCancellation("Input was cancelled by user")
            if record["state"] == "running" and not _alive(_pid(self.object_id)):
                raise exception.RemoteError("container exited without a result")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError()
            time.sleep(0.02)

    def cancel(self, terminate_containers: bool = False) -> None:
        record = self._record()
        if record["state"] in ("pending", "running"):
            _write_json(_call_path(self.object_id), {**record, "state": "cancelled"})
            pid = _pid(self.object_id)
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)


def _client_fault(method: str) -> None:
    """Raise the next fault `fake_faults.plan_client_faults` planned for `method` (for this thread,
    this process, or any), if any: what Modal's service answers instead of doing the call (a `ServiceError`, a
    rate limit ...). Dict methods are named with their Dict: ``Dict.get:<dict name>``."""
    path = _root() / "client-faults.json"
    if not path.exists():
        return
    with _db_lock:
        plan = json.loads(path.read_text())
        names = (
            plan.get(f"{method}#{os.getpid()}.{threading.get_ident()}")
            or plan.get(f"{method}@{os.getpid()}")
            or plan.get(method)
            or []
        )
        if not names:
            return
        name = names.pop(0)
        _write_json(path, plan)  # replaced whole: a reader never sees it half written
    raise getattr(exception, name)(f"{name} from the fake Modal service ({method})")


def _alive(pid: int | None) -> bool:
    if not pid:
        return True  # not started yet
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


# --------------------------------------------------------------------------- the container


#: Modal restarts a crashed container of a deployed function again and again (with a
#: crash-loop backoff), beyond `Retries`. The fake gives up after this many, so a test
#: of a crash loop ends; trainkit must stop it well before.
CRASH_LOOP_SAFETY = 12


def _start_attempt(
    call_id: str, name: str, attempt: int, outcome_path: Path, cluster: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """One attempt's container: the strict simulation's image when it is deployed, else this fake's worker."""
    attempt_env = {"FAKE_MODAL_ATTEMPT": str(attempt), "FAKE_MODAL_OUTCOME": str(outcome_path), **(cluster or {})}
    container = (_read_json(_root() / "containers.json") or {}).get(name)
    if container is None:
        return _python_child("worker_main", call_id, stdout="log", env=attempt_env)
    # The strict container simulation (tests/modal/container_sim): the image's Python, its
    # /root and only the environment the app declares.
    env = {**container["env"], "FAKE_MODAL_ROOT": str(_root()), "FAKE_MODAL_CALL_ID": call_id, **attempt_env}
    with open(_root() / "calls" / f"{call_id}.log", "ab") as log:
        return subprocess.Popen(
            [*container["argv"], call_id],
            cwd=container["cwd"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )


def scheduler_main() -> None:
    """Modal's side of one call: run attempts in fresh containers until one has an outcome that stands.

    An attempt whose function raises is retried while the function's `Retries` allow
    (`max_retries`); an attempt whose container dies without an outcome (OOM, segfault,
    SIGKILL) is restarted without counting against them, as Modal does for deployed
    functions. The call's record lists each attempt's end.
    """
    call_id = os.environ["FAKE_MODAL_CALL_ID"]
    record = _read_json(_call_path(call_id))
    _write_json(_call_path(call_id), {**record, "state": "running"})
    retries_left = int(record["policy"]["max_retries"])
    crashes = 0
    attempt = 0
    while True:
        attempt += 1
        outcome_path = _root() / "calls" / f"{call_id}.attempt-{attempt}.json"
        size = int(record["policy"].get("cluster_size") or 1)
        if size == 1:
            returncode = _start_attempt(call_id, record["name"], attempt, outcome_path).wait()
        else:
            # A clustered function: `size` containers scheduled together, each told its rank and
            # the cluster's addresses; the input's outcome is rank 0's (as Modal returns it).
            containers = [
                _start_attempt(
                    call_id,
                    record["name"],
                    attempt,
                    outcome_path if rank == 0 else outcome_path.with_suffix(f".rank{rank}.json"),
                    {"FAKE_MODAL_CLUSTER_RANK": str(rank), "FAKE_MODAL_CLUSTER_IPS": ",".join(["127.0.0.1"] * size)},
                )
                for rank in range(size)
            ]
            returncodes = [c.wait() for c in containers]  # every container ends before the call does
            returncode = returncodes[0]
        outcome = _read_json(outcome_path)
        end = "crashed" if outcome is None else outcome["state"]
        current = _read_json(_call_path(call_id))
        if current["state"] == "cancelled":
            return
        _write_json(
            _call_path(call_id), {**current, "attempts": [*current["attempts"], {"end": end, "returncode": returncode}]}
        )
        if outcome is None:
            crashes += 1
            if crashes < CRASH_LOOP_SAFETY:
                continue
            outcome = {"state": "failed", "error": pickle.dumps(exception.RemoteError("crash loop")).hex()}
        elif outcome["state"] == "failed" and retries_left > 0:
            retries_left -= 1
            continue
        current = _read_json(_call_path(call_id))
        if current["state"] != "cancelled":
            _write_json(_call_path(call_id), {**current, **outcome})
        return


def worker_main() -> None:
    """Run one attempt like a Modal container: import the app (rebuilt with this fake), call the function.

    Its outcome goes to ``FAKE_MODAL_OUTCOME``; a container that dies writes none.
    With ``FAKE_MODAL_FAULTS`` set, `fake_faults` injects the faults a test asks for.
    """
    sys.modules["modal"] = sys.modules[__name__]
    call_id = os.environ["FAKE_MODAL_CALL_ID"]
    record = _read_json(_call_path(call_id))
    try:
        if os.environ.get("FAKE_MODAL_FAULTS") or os.environ.get("FAKE_MODAL_INFER_FAULTS"):
            import fake_faults

            fake_faults.install()
        from trainkit_core.plugins.hookspecs import VOLUME_KINDS
        from trainkit_core.settings import Settings
        from trainkit_modal import container, spec
        from trainkit_modal.app import build_app

        container.WarmInference.preload = lambda self: None  # type: ignore[method-assign]  # no torch import here

        settings = Settings.from_env()
        for kind in VOLUME_KINDS:  # the volumes' "mount points" in this fake container
            spec.MOUNT_PATHS[kind] = str(Volume.from_name(settings.volumes.name_for(kind), create_if_missing=True).root)
        declared = build_app(settings, sdk=sys.modules[__name__]).objects[record["name"]]
        kwargs = dict(record["kwargs"])
        if declared.kind == "class":
            instance = declared.target()
            for attr in dir(instance):
                if getattr(getattr(instance, attr), "_fake_enter", False):
                    getattr(instance, attr)()
            result = getattr(instance, kwargs.pop("__method__"))(*record["args"], **kwargs)
            if inspect.isgenerator(result):
                result = list(result)
        else:
            result = declared.target(*record["args"], **kwargs)
        outcome = {"state": "succeeded", "result": pickle.dumps(result).hex()}
    except BaseException as exc:
        try:
            blob = pickle.dumps(exc)
        except Exception:
            blob = pickle.dumps(exception.RemoteError(f"{type(exc).__name__}: {exc}"))
        outcome = {"state": "failed", "error": blob.hex()}
    _write_json(Path(os.environ["FAKE_MODAL_OUTCOME"]), outcome)


__all__ = [
    "App",
    "Cls",
    "Cluster",
    "Dict",
    "Function",
    "FunctionCall",
    "Image",
    "Retries",
    "Secret",
    "Volume",
    "clustered",
    "exception",
    "io",
]
