"""Checking relative paths given to a volume, so nothing can leave it."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from trainkit_core.errors import UsageError


def clean_relative(path: str, *, what: str = "path", allow_root: bool = False) -> str:
    """Normalise a volume path to `a/b/c`; refuse what could point outside the volume.

    Refused: absolute paths, drive letters, backslashes, `..`, NUL bytes and other
    control characters. The empty path (the volume's root) only with `allow_root`.
    """
    if not isinstance(path, str):
        raise UsageError(f"{what} must be a string, got {type(path).__name__}")
    if any(ord(ch) < 32 for ch in path):
        raise UsageError(f"{what} {path!r} contains a control character")
    if "\\" in path:
        raise UsageError(f"{what} {path!r} contains a backslash; use '/'")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise UsageError(f"{what} {path!r} is absolute; give a path inside the volume")
    parts = [p for p in PurePosixPath(path).parts if p not in ("", ".")]
    if ".." in parts:
        raise UsageError(f"{what} {path!r} contains '..'")
    if not parts and not allow_root:
        raise UsageError(f"{what} is empty")
    return "/".join(parts)


def inside(root: Path, relative: str) -> Path:
    """`root / relative`, refusing a result that resolves outside `root` (through symlinks too)."""
    target = root / relative if relative else root
    real_root = os.path.realpath(root)
    real_target = os.path.realpath(target)
    if real_target != real_root and not real_target.startswith(real_root + os.sep):
        raise UsageError(f"path {relative!r} resolves outside the volume (through a symbolic link)")
    return target


def check_folder_setting(path: Path, variable: str) -> Path:
    """`path` when it is, or can become, a folder; `UsageError` naming `variable` when a file is in the way.

    A setting such as ``TRAINKIT_HOME=/etc/hosts`` would otherwise fail deep inside
    with `FileExistsError` or `NotADirectoryError`. The first part of `path` that
    exists must be a folder.
    """
    path = Path(path)
    for candidate in (path, *path.parents):
        try:
            if not candidate.exists():
                continue
            if candidate.is_dir():
                return path
        except OSError as exc:
            raise UsageError(f"{variable}: cannot use {str(path)!r} as a folder ({exc.strerror})") from None
        where = "" if candidate == path else f" ({str(candidate)!r} is a file)"
        raise UsageError(
            f"{variable} names a file, not a folder: {str(path)!r}{where}",
            hint=f"point {variable} at a folder (or leave it unset)",
        )
    return path
