"""The provider's state and volumes on the cluster's shared storage path.

Everything durable lives under one folder that every node mounts at the same path (as
Ray Train's ``storage_path`` and KubeRay's volumes are): ``kv.sqlite3`` (the SQLite
store, the same as the local provider's, so it survives a restart of the cluster, unlike
Ray's internal KV), ``volumes/<name>/`` (folder volumes), ``logs/<call id>.log`` and
``secrets/<call id>.json`` (mode 0600, removed when the call ends).

A machine that does not mount the path (``TRAINKIT_RAY_STORAGE_ACCESS=cluster``) reaches
the same files through `trainkit_ray.storage_actor`, which runs on the cluster.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.toolkit.folder_volume import FolderVolume
from trainkit_core.toolkit.sqlite_kv import LocalKV
from trainkit_core.toolkit.volume_paths import check_folder_setting, clean_relative, inside

#: The folders under the storage path that are not volumes.
LOGS, SECRETS = "logs", "secrets"


class MountedStorage:
    """The shared storage path as a folder of this machine."""

    def __init__(self, root: Path) -> None:
        self.root = check_folder_setting(Path(root), "TRAINKIT_RAY_STORAGE")

    def __repr__(self) -> str:
        return f"<MountedStorage {self.root}>"

    def kv(self, namespace: str) -> LocalKV:
        return LocalKV(self.root, namespace)

    def volume(self, name: str) -> FolderVolume:
        if "/" in name:
            raise UsageError(f"volume name {name!r} must not contain '/'")
        return FolderVolume(inside(self.root / "volumes", clean_relative(name, what="volume name")), name)

    def volume_root(self, name: str) -> Path:
        return self.volume(name).root

    def log_path(self, call_id: str) -> Path:
        return self.root / LOGS / f"{clean_relative(call_id, what='call id')}.log"

    def read_log(self, call_id: str) -> str:
        try:
            return self.log_path(call_id).read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _secrets_path(self, call_id: str) -> Path:
        return self.root / SECRETS / f"{clean_relative(call_id, what='call id')}.json"

    def write_secrets(self, call_id: str, values: dict[str, str]) -> None:
        """Only the owner may read the file; it is written whole or not at all."""
        path = self._secrets_path(call_id)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = path.with_suffix(f".{os.getpid()}.part")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(values, out)
        os.replace(partial, path)

    def read_secrets(self, call_id: str) -> dict[str, str]:
        try:
            values: dict[str, str] = json.loads(self._secrets_path(call_id).read_text())
        except FileNotFoundError:
            return {}
        return values

    def remove_secrets(self, call_id: str) -> None:
        self._secrets_path(call_id).unlink(missing_ok=True)

    def describe(self) -> dict[str, Any]:
        return {"storage": str(self.root), "access": "mounted"}
