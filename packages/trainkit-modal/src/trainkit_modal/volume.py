"""The `Volume` of the Modal provider, over `modal.Volume`, used from outside a container.

Writes go through `batch_upload(force=True)`: Modal makes a batch visible as a whole
when it ends, so a reader sees the old file or the new one, never a part (the
protocol's atomic write), and `sync` uploads a dataset's files in one batch. Inside a
container the job code writes to the mount point instead and calls `commit`
(`commit_volume` below); writes are invisible to others until then.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any

from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.plugins.hookspecs import FileEntry
from trainkit_core.toolkit.volume_paths import clean_relative
from trainkit_modal.errors import translate

#: `modal.volume.FileEntryType.DIRECTORY`
_DIRECTORY = 2


def _remote(path: str) -> str:
    """Modal's path of a volume path: the root is `/`."""
    return path or "/"


def _entry_type(entry: Any) -> int:
    kind = getattr(entry, "type", 0)
    return int(getattr(kind, "value", kind))


class ModalVolume:
    """A named `modal.Volume` (created when missing); paths are relative and never leave it."""

    def __init__(self, sdk: Any, name: str) -> None:
        if "/" in name:
            raise UsageError(f"volume name {name!r} must not contain '/'")
        self.name = name
        self._sdk = sdk
        self._volume = sdk.Volume.from_name(name, create_if_missing=True)

    def __repr__(self) -> str:
        return f"<ModalVolume {self.name}>"

    def _where(self, path: str) -> str:
        return f"volume {self.name}, {path or '/'}"

    def _list(self, path: str, recursive: bool) -> list[Any] | None:
        """Modal's listing of `path`, or None when nothing is there."""
        not_found: tuple[type[BaseException], ...] = (FileNotFoundError,)
        modal_not_found = getattr(getattr(self._sdk, "exception", None), "NotFoundError", None)
        if isinstance(modal_not_found, type):
            not_found += (modal_not_found,)
        try:
            with translate(self._sdk, self._where(path)):
                try:
                    return list(self._volume.listdir(_remote(path), recursive=recursive))
                except not_found:
                    return None
        except NotFoundError:
            return None

    def _is_file(self, path: str, listing: list[Any]) -> bool:
        return len(listing) == 1 and listing[0].path.strip("/") == path and _entry_type(listing[0]) != _DIRECTORY

    def _kind(self, path: str) -> str | None:
        """ "dir", "file" or None (missing)."""
        if not path:
            return "dir"
        listing = self._list(path, recursive=False)
        if listing is None:
            return None
        if self._is_file(path, listing):
            return "file"
        if listing:
            return "dir"
        # An empty listing: an empty folder, or nothing at all; the parent tells.
        parent, _, _ = path.rpartition("/")
        siblings = self._list(parent, recursive=False) or []
        return "dir" if any(e.path.strip("/") == path for e in siblings) else None

    def exists(self, path: str) -> bool:
        return self._kind(clean_relative(path, allow_root=True)) is not None

    def listdir(self, path: str = "", *, recursive: bool = False) -> list[FileEntry]:
        rel = clean_relative(path, allow_root=True)
        if self._kind(rel) != "dir":
            raise NotFoundError(f"no folder {path!r} on volume {self.name!r}")
        listing = self._list(rel, recursive=recursive) or []
        entries = [
            FileEntry(
                e.path.strip("/"),
                _entry_type(e) == _DIRECTORY,
                0 if _entry_type(e) == _DIRECTORY else int(getattr(e, "size", 0)),
                float(getattr(e, "mtime", 0)),
            )
            for e in listing
            if e.path.strip("/") != rel
        ]
        return sorted(entries, key=lambda e: e.path)

    def read_bytes(self, path: str) -> bytes:
        rel = clean_relative(path)
        try:
            with translate(self._sdk, self._where(rel)):
                return b"".join(self._volume.read_file(rel))
        except (FileNotFoundError, NotFoundError):
            raise NotFoundError(f"no file {path!r} on volume {self.name!r}") from None

    def _upload(self, rel: str, put: Any) -> None:
        with translate(self._sdk, self._where(rel)), self._volume.batch_upload(force=True) as batch:
            put(batch)

    def write_bytes(self, path: str, data: bytes) -> None:
        rel = clean_relative(path)
        self._upload(rel, lambda batch: batch.put_file(io.BytesIO(bytes(data)), rel))

    def put_file(self, local_path: Path, path: str) -> None:
        local_path = Path(local_path)
        if not local_path.is_file():
            raise NotFoundError(f"no local file {str(local_path)!r}")
        rel = clean_relative(path)
        self._upload(rel, lambda batch: batch.put_file(local_path, rel))

    def put_directory(self, local_dir: Path, path: str) -> None:
        local_dir = Path(local_dir)
        if not local_dir.is_dir():
            raise NotFoundError(f"no local folder {str(local_dir)!r}")
        rel = clean_relative(path, allow_root=True)
        self._upload(rel, lambda batch: batch.put_directory(local_dir, _remote(rel)))

    def get_file(self, path: str, local_path: Path) -> None:
        """Stream the file to disk (`read_file_into_fileobj`): a multi-GB model never sits in memory.

        Written to a temporary file beside `local_path` and renamed into place, so a failed
        download leaves nothing behind.
        """
        rel = clean_relative(path)
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=local_path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                try:
                    with translate(self._sdk, self._where(rel)):
                        self._volume.read_file_into_fileobj(rel, out)
                except (FileNotFoundError, NotFoundError):
                    raise NotFoundError(f"no file {path!r} on volume {self.name!r}") from None
            os.replace(tmp, local_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_directory(self, path: str, local_dir: Path) -> None:
        rel = clean_relative(path, allow_root=True)
        for entry in self.listdir(rel, recursive=True):
            dest = Path(local_dir) / entry.path[len(rel) :].lstrip("/")
            if entry.is_dir:
                dest.mkdir(parents=True, exist_ok=True)
            else:
                self.get_file(entry.path, dest)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        rel = clean_relative(path)
        kind = self._kind(rel)
        if kind is None:
            raise NotFoundError(f"nothing at {path!r} on volume {self.name!r}")
        if kind == "dir" and not recursive:
            raise UsageError(f"{path!r} on volume {self.name!r} is a folder; remove it with recursive=True")
        try:
            with translate(self._sdk, self._where(rel)):
                self._volume.remove_file(rel, recursive=recursive)
        except (FileNotFoundError, NotFoundError):
            raise NotFoundError(f"nothing at {path!r} on volume {self.name!r}") from None


def commit_volume(sdk: Any, name: str) -> None:
    """Inside a container: make this container's writes to volume `name` visible to others."""
    sdk.Volume.from_name(name).commit()


def reload_volume(sdk: Any, name: str) -> None:
    """Inside a container: see what other containers committed to volume `name`."""
    sdk.Volume.from_name(name).reload()
