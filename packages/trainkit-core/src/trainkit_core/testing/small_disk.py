"""A real small file system for tests of a full disk: a tmpfs mounted for the test (needs root).

Tests of what trainkit does when its disk fills use a real full file system rather
than a mocked ``OSError``: SQLite, atomic renames and log files all meet the full disk
where they really write. Where mounting is not allowed, `mount_tmpfs` says why, so the
test is skipped with that reason.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def mount_tmpfs(where: Path, size: str) -> str | None:
    """Mount a tmpfs of `size` (``5m``) at `where`: None when mounted, else the reason it cannot be here."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root (CI's containers run as root)"
    Path(where).mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        return f"mount -t tmpfs is not allowed here: {done.stderr.decode(errors='replace').strip()}"
    return None


def unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def fill(folder: Path) -> Path:
    """Write one file until the file system of `folder` is full; delete the returned file to free the space."""
    filler = Path(folder) / "filler.bin"
    with open(filler, "wb", buffering=0) as out:  # unbuffered: nothing left to fail at close
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass
    return filler
