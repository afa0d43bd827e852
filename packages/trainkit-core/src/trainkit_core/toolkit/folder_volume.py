"""Folder volumes: a folder that behaves like a cloud volume.

The `local` provider's volumes are folders under its home; inside a job, every
provider's volumes are folders too (`JobContext.path`), which the job code reads and
writes through this class.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from trainkit_core.errors import NotFoundError, UsageError, out_of_space, out_of_space_error
from trainkit_core.plugins.hookspecs import FileEntry
from trainkit_core.toolkit.volume_paths import clean_relative, inside

_CHUNK = 1 << 20


class FolderVolume:
    """A folder that behaves like a cloud volume: relative paths only, atomic writes."""

    def __init__(self, root: Path, name: str | None = None) -> None:
        self.name = name or Path(root).name
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"<FolderVolume {self.name} at {self.root}>"

    def _path(self, path: str, *, allow_root: bool = False) -> Path:
        return inside(self.root, clean_relative(path, allow_root=allow_root))

    def _link(self, path: str) -> Path | None:
        """The symbolic link `path` names (its folder inside the volume), not followed; None when it is no link.

        A link placed in the volume (by a user, by another tool) may point anywhere:
        it is listed as a plain entry, never descended into, and removing it removes
        the link only, so nothing outside the volume is ever touched.
        """
        relative = clean_relative(path, allow_root=True)
        if not relative:
            return None
        parent, _, name = relative.rpartition("/")
        candidate = inside(self.root, parent) / name
        return candidate if candidate.is_symlink() else None

    def exists(self, path: str) -> bool:
        if self._link(path) is not None:
            return True
        return self._path(path, allow_root=True).exists()

    def listdir(self, path: str = "", *, recursive: bool = False) -> list[FileEntry]:
        base = self._path(path, allow_root=True)
        if not base.is_dir():
            raise NotFoundError(f"no folder {path!r} on volume {self.name!r}")
        entries = []
        for item in self._walk(base, recursive):
            if item.name.startswith(".tmp-"):
                continue  # an atomic write in progress
            st = item.lstat()
            rel = item.relative_to(self.root).as_posix()
            is_dir = stat.S_ISDIR(st.st_mode)  # a link is an entry of its own, folder or not
            entries.append(FileEntry(rel, is_dir, 0 if is_dir else st.st_size, st.st_mtime))
        return sorted(entries, key=lambda e: e.path)

    @staticmethod
    def _walk(base: Path, recursive: bool) -> list[Path]:
        if not recursive:
            return list(base.iterdir())
        found: list[Path] = []
        for folder, dirs, files in os.walk(base):  # links to folders are listed, not followed
            found.extend(Path(folder) / name for name in (*dirs, *files))
        return found

    def partial_writes(self, older_than: float) -> list[str]:
        """Temporary files of atomic writes (``.tmp-*``) last touched before `older_than`: a killed writer's.

        Listings hide them, so `trainkit_core.runs.retention.collect_garbage` asks for them
        here (an optional method: volumes whose uploads are atomic have none).
        """
        found = []
        for folder, dirs, files in os.walk(self.root):
            for name in (*files, *dirs):
                item = Path(folder) / name
                if name.startswith(".tmp-") and item.lstat().st_mtime < older_than:
                    found.append(item.relative_to(self.root).as_posix())
        return sorted(found)

    def read_bytes(self, path: str) -> bytes:
        target = self._path(path)
        if not target.is_file():
            raise NotFoundError(f"no file {path!r} on volume {self.name!r}")
        return target.read_bytes()

    def _atomic_write(self, target: Path, write: object, *, size: int | None = None) -> None:
        """Write through a temporary file renamed into place; a full disk is an `OutOfSpaceError`."""
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
        except OSError as exc:
            if out_of_space(exc):
                raise out_of_space_error(
                    f"{target.name} on volume {self.name!r}", str(target.parent), needed=size
                ) from None
            raise
        try:
            with os.fdopen(fd, "wb") as out:
                write(out)  # type: ignore[operator]
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException as exc:
            Path(tmp).unlink(missing_ok=True)
            if out_of_space(exc):
                what = f"{target.relative_to(self.root).as_posix()} on volume {self.name!r}"
                raise out_of_space_error(what, str(self.root), needed=size) from None
            raise

    def write_bytes(self, path: str, data: bytes) -> None:
        self._atomic_write(self._path(path), lambda out: out.write(data), size=len(data))

    def put_file(self, local_path: Path, path: str) -> None:
        local_path = Path(local_path)
        if not local_path.is_file():
            raise NotFoundError(f"no local file {str(local_path)!r}")
        target = self._path(path)

        def copy(out: object) -> None:
            with open(local_path, "rb") as src:
                shutil.copyfileobj(src, out, _CHUNK)  # type: ignore[arg-type]

        self._atomic_write(target, copy, size=local_path.stat().st_size)

    def put_directory(self, local_dir: Path, path: str) -> None:
        local_dir = Path(local_dir)
        if not local_dir.is_dir():
            raise NotFoundError(f"no local folder {str(local_dir)!r}")
        base = clean_relative(path, allow_root=True)
        self._path(base, allow_root=True).mkdir(parents=True, exist_ok=True)
        for item in sorted(local_dir.rglob("*")):
            rel = item.relative_to(local_dir).as_posix()
            dest = f"{base}/{rel}" if base else rel
            if item.is_dir():
                self._path(dest).mkdir(parents=True, exist_ok=True)
            elif item.is_file():
                self.put_file(item, dest)

    def get_file(self, path: str, local_path: Path) -> None:
        source = self._path(path)
        if not source.is_file():
            raise NotFoundError(f"no file {path!r} on volume {self.name!r}")
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, local_path)

    def get_directory(self, path: str, local_dir: Path) -> None:
        for entry in self.listdir(path, recursive=True):
            rel = entry.path[len(clean_relative(path, allow_root=True)) :].lstrip("/")
            dest = Path(local_dir) / rel
            if entry.is_dir:
                dest.mkdir(parents=True, exist_ok=True)
            else:
                self.get_file(entry.path, dest)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        link = self._link(path)
        if link is not None:
            link.unlink()  # the link, never what it points to
            return
        target = self._path(path)
        if not target.exists() and not target.is_symlink():
            raise NotFoundError(f"nothing at {path!r} on volume {self.name!r}")
        if target.is_dir() and not target.is_symlink():
            if not recursive:
                raise UsageError(f"{path!r} on volume {self.name!r} is a folder; remove it with recursive=True")
            shutil.rmtree(target)
        else:
            target.unlink()
