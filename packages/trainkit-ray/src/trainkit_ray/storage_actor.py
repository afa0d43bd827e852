"""The shared storage for a machine that does not mount it (``TRAINKIT_RAY_STORAGE_ACCESS=cluster``).

A laptop connected through Ray Client (``ray://``) cannot open the SQLite file or the
volume folders on the cluster's shared path, so a detached actor on the cluster does it
for it: `ClusterStorage` offers the same objects as `MountedStorage` (key-value
namespaces, volumes, call logs, call secrets) and sends each operation to the actor.
Files travel whole as bytes through Ray's object store (fine for datasets and adapters;
a base model of many GB would rather be read on the cluster).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from trainkit_core.plugins.hookspecs import FileEntry
from trainkit_ray.connection import connect, find_actor
from trainkit_ray.errors import unwrap
from trainkit_ray.settings import RaySettings
from trainkit_ray.storage import MountedStorage

#: What the actor runs on a volume or a namespace for a client: the protocols' reads and writes.
VOLUME_OPERATIONS = frozenset({"exists", "listdir", "read_bytes", "write_bytes", "remove"})
KV_OPERATIONS = frozenset({"get", "put", "put_if_absent", "delete", "keys", "items", "get_many", "put_many", "update"})
STORAGE_OPERATIONS = frozenset({"read_log", "write_secrets", "remove_secrets", "describe"})


def actor_name(root: str) -> str:
    return "trainkit-storage-" + hashlib.sha256(root.encode()).hexdigest()[:12]


class StorageActor:
    """The actor's body: a `MountedStorage` on a cluster node."""

    def __init__(self, root: str) -> None:
        self.storage = MountedStorage(Path(root))

    def kv(self, namespace: str, operation: str, args: tuple[Any, ...]) -> Any:
        if operation not in KV_OPERATIONS:
            raise ValueError(f"no key-value operation {operation!r}")
        return getattr(self.storage.kv(namespace), operation)(*args)

    def volume(self, name: str, operation: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if operation not in VOLUME_OPERATIONS:
            raise ValueError(f"no volume operation {operation!r}")
        return getattr(self.storage.volume(name), operation)(*args, **kwargs)

    def storage_call(self, operation: str, args: tuple[Any, ...]) -> Any:
        if operation not in STORAGE_OPERATIONS:
            raise ValueError(f"no storage operation {operation!r}")
        return getattr(self.storage, operation)(*args)


class ClusterStorage:
    """The shared storage through the storage actor (see the module docstring)."""

    def __init__(self, own: RaySettings, root: str) -> None:
        self.own = own
        self.root = root
        self._actor: Any = None

    def __repr__(self) -> str:
        return f"<ClusterStorage {self.root} through the cluster>"

    def actor(self) -> Any:
        if self._actor is None:
            ray = connect(self.own)
            name = actor_name(self.root)
            self._actor = find_actor(self.own, name) or ray.remote(StorageActor).options(
                name=name, namespace=self.own.namespace, lifetime="detached", get_if_exists=True, num_cpus=0
            ).remote(self.root)
        return self._actor

    def call(self, method: str, *args: Any) -> Any:
        ray = connect(self.own)
        with unwrap():
            return ray.get(getattr(self.actor(), method).remote(*args))

    def kv(self, namespace: str) -> RemoteKV:
        return RemoteKV(self, namespace)

    def volume(self, name: str) -> RemoteVolume:
        return RemoteVolume(self, name)

    def read_log(self, call_id: str) -> str:
        return str(self.call("storage_call", "read_log", (call_id,)))

    def write_secrets(self, call_id: str, values: dict[str, str]) -> None:
        self.call("storage_call", "write_secrets", (call_id, values))

    def remove_secrets(self, call_id: str) -> None:
        self.call("storage_call", "remove_secrets", (call_id,))

    def describe(self) -> dict[str, Any]:
        return {"storage": self.root, "access": "cluster"}


class RemoteKV:
    """A key-value namespace of the shared store, through the storage actor."""

    def __init__(self, storage: ClusterStorage, namespace: str) -> None:
        from trainkit_core.errors import UsageError

        if not namespace or not isinstance(namespace, str):
            raise UsageError("key-value namespace must be a non-empty string")
        self.storage = storage
        self.namespace = namespace

    def _do(self, operation: str, *args: Any) -> Any:
        return self.storage.call("kv", self.namespace, operation, args)

    def get(self, key: str, default: Any = None) -> Any:
        return self._do("get", key, default)

    def put(self, key: str, value: Any) -> None:
        from trainkit_core.toolkit.kv_values import check_key, dump_value

        check_key(key)
        dump_value(value)  # refused here, before anything travels
        self._do("put", key, value)

    def put_if_absent(self, key: str, value: Any) -> bool:
        return bool(self._do("put_if_absent", key, value))

    def delete(self, key: str) -> bool:
        return bool(self._do("delete", key))

    def keys(self, prefix: str = "") -> list[str]:
        return list(self._do("keys", prefix))

    def items(self, prefix: str = "") -> list[tuple[str, Any]]:
        return [tuple(item) for item in self._do("items", prefix)]  # type: ignore[misc]

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        return dict(self._do("get_many", list(keys)))

    def put_many(self, items: Any) -> None:
        self._do("put_many", dict(items))


class RemoteVolume:
    """A volume on the shared storage, through the storage actor; files travel whole."""

    def __init__(self, storage: ClusterStorage, name: str) -> None:
        self.storage = storage
        self.name = name

    def _do(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        return self.storage.call("volume", self.name, operation, args, kwargs)

    def exists(self, path: str) -> bool:
        return bool(self._do("exists", path))

    def listdir(self, path: str = "", *, recursive: bool = False) -> list[FileEntry]:
        return list(self._do("listdir", path, recursive=recursive))

    def read_bytes(self, path: str) -> bytes:
        return bytes(self._do("read_bytes", path))

    def write_bytes(self, path: str, data: bytes) -> None:
        self._do("write_bytes", path, bytes(data))

    def put_file(self, local_path: Path, path: str) -> None:
        self.write_bytes(path, Path(local_path).read_bytes())

    def put_directory(self, local_dir: Path, path: str) -> None:
        from trainkit_core.errors import NotFoundError

        local_dir = Path(local_dir)
        if not local_dir.is_dir():
            raise NotFoundError(f"no local folder {local_dir}")
        for file in sorted(p for p in local_dir.rglob("*") if p.is_file()):
            relative = file.relative_to(local_dir).as_posix()
            self.put_file(file, f"{path.rstrip('/')}/{relative}" if path.strip("/") else relative)

    def get_file(self, path: str, local_path: Path) -> None:
        data = self.read_bytes(path)
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=local_path.parent, prefix=f".{local_path.name}.")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(partial, local_path)

    def get_directory(self, path: str, local_dir: Path) -> None:
        base = path.strip("/")
        for entry in self.listdir(path, recursive=True):
            relative = entry.path[len(base) :].lstrip("/") if base else entry.path
            target = Path(local_dir) / relative
            if entry.is_dir:
                target.mkdir(parents=True, exist_ok=True)
            else:
                self.get_file(entry.path, target)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        self._do("remove", path, recursive=recursive)
