#!/usr/bin/env python3
"""Set-up and entry point for a fresh clone: needs only Python 3.

    python3 run.py test    # the test suite (nox's default sessions)
    python3 run.py demo    # the main job: fine-tune the tiny model on the demo data

Creates `.venv-tools` with nox on first use; nox then builds one virtual
environment per session. Extra arguments go to nox (`python3 run.py test -s lint`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TOOLS = ROOT / ".venv-tools"
NOX = "nox>=2025.2.9"


def tools_python() -> Path:
    python = TOOLS / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        print(f"run.py: creating {TOOLS.name} with {NOX}", flush=True)
        venv.EnvBuilder(with_pip=True).create(TOOLS)
        subprocess.run([str(python), "-m", "pip", "install", "-q", NOX], check=True)
    return python


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("test", "demo"):
        print(__doc__, file=sys.stderr)
        return 2
    command, extra = argv[0], argv[1:]
    nox = [str(tools_python()), "-m", "nox", "-f", str(ROOT / "noxfile.py")]
    if command == "demo":
        nox += ["-s", "demo", "--", *extra]
    else:
        nox += extra
    return subprocess.run(nox, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
