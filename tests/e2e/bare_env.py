"""A Python environment holding only transformers and torch (and what they require).

For proving that an export loads with no trainkit and no peft: a folder of symbolic
links to exactly the installed distributions that `transformers` and `torch` require
(their ``Requires-Dist`` closure without extras, markers evaluated here), run with
``python -I -S`` (no site-packages, no PYTHONPATH, no user site) and that folder alone
on ``sys.path``. peft and the trainkit packages are not in the folder, so neither their
modules nor their metadata can be found; the script checks that too. Building it
copies nothing, so it costs milliseconds instead of a new virtual environment.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOTS = ("transformers", "torch")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: tuple[str, ...] = ROOTS) -> dict[str, metadata.Distribution]:
    """The installed distributions `roots` need (no extras), by normalised name."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = _norm(todo.pop())
        if name in found:
            continue
        dist = metadata.distribution(name)
        found[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def build(dest: Path, roots: tuple[str, ...] = ROOTS) -> Path:
    """Fill `dest` with links to the top-level files of the closure's distributions; returns `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for dist in closure(roots).values():
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            link = dest / top
            if source.exists() and not link.exists():
                link.symlink_to(source)
    return dest


def run(site: Path, script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run `script` with `python -I -S` and only `site` on sys.path."""
    prelude = f"import sys; sys.path.insert(0, {str(site)!r})\n"
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
