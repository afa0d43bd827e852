"""Folders for the jobs of a provider whose volumes are not folders.

A job sees each volume as a folder (`JobContext.path(kind)`). A provider whose
volumes are folders on the job's machine hands them over as they are (``local``); one
whose volumes are something else (rows in a database, objects in a bucket) gives the
job a staged copy with `StagedVolumes`:

- **stage in**: the first `path(kind)` of a job copies that volume into a folder of
  the job's own (only the volumes a job touches are copied);
- **commit** (`ctx.commit(kind)`): writes back what the job changed in the folder
  since it was staged or last committed: new and changed files are uploaded, deleted
  ones removed; the others' writes to other files are kept. Until then, nobody else
  sees the job's writes, which is the same rule Modal's volumes follow;
- **reload** (`ctx.reload(kind)`): copies the volume in again, to see what others
  committed; uncommitted writes in the folder are discarded.

::

    staged = StagedVolumes(lambda kind: my_volume(settings, settings.volumes.name_for(kind)), folder)
    JobContext(settings=settings, provider=NAME, call_id=call_id, kv_factory=...,
               volume_paths=staged, commit=staged.commit, reload=staged.reload)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.plugins.hookspecs import VOLUME_KINDS, Volume

_Snapshot = dict[str, tuple[int, int]]


def _files(folder: Path) -> _Snapshot:
    """Relative path -> (size, mtime in ns) of every file under `folder`."""
    found: _Snapshot = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            found[path.relative_to(folder).as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return found


class StagedVolumes(Mapping[str, Path]):
    """Volume kind -> a folder holding a copy of that volume, staged on first use.

    `volume_of(kind)` returns the provider's `Volume` of a kind; `root` is a folder of
    the job's own (one sub-folder per kind is made in it).
    """

    def __init__(self, volume_of: Callable[[str], Volume], root: Path, kinds: tuple[str, ...] = VOLUME_KINDS) -> None:
        self._volume_of = volume_of
        self.root = Path(root)
        self.kinds = kinds
        self._staged: dict[str, _Snapshot] = {}

    def __getitem__(self, kind: str) -> Path:
        if kind not in self.kinds:
            raise KeyError(kind)
        folder = self.root / kind
        if kind not in self._staged:
            self._stage_in(kind, folder)
        return folder

    def __contains__(self, kind: object) -> bool:
        return kind in self.kinds

    def __iter__(self) -> Iterator[str]:
        return iter(self.kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    def _stage_in(self, kind: str, folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        volume = self._volume_of(kind)
        for entry in volume.listdir("", recursive=True):
            if not entry.is_dir:
                volume.get_file(entry.path, folder / entry.path)
        self._staged[kind] = _files(folder)

    def commit(self, kind: str) -> None:
        """Write back what changed in the folder of `kind` (nothing when it was never staged)."""
        if kind not in self.kinds:
            raise UsageError(f"unknown volume kind {kind!r}; expected one of {', '.join(self.kinds)}")
        if kind not in self._staged:
            return
        folder, before = self.root / kind, self._staged[kind]
        now = _files(folder)
        volume = self._volume_of(kind)
        for path, mark in sorted(now.items()):
            if before.get(path) != mark:
                volume.put_file(folder / path, path)
        for path in sorted(set(before) - set(now)):
            try:
                volume.remove(path)
            except NotFoundError:
                pass  # someone else removed it too
        self._staged[kind] = now

    def reload(self, kind: str) -> None:
        """Copy the volume in again (uncommitted writes in the folder are discarded)."""
        if kind in self._staged:
            self._stage_in(kind, self.root / kind)
