#!/usr/bin/env python3
"""Set-up and entry point for a fresh clone: needs only Python 3.

    python3 run.py test    # the test suite (nox's default sessions)
    python3 run.py demo    # the main job: fine-tune the tiny model on the demo data
    python3 run.py demo-images  # the image demo: the Gemma 3 vision twin learns coloured shapes
    python3 run.py docs-serve   # the documentation site at http://127.0.0.1:8000/trainkit/

Creates `.venv-tools` with nox on first use; nox then builds one virtual
environment per session. Extra arguments go to nox (`python3 run.py test -s lint`).
Without them, `test` runs nox's default sessions in two lanes at once (see `run_lanes`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TOOLS = ROOT / ".venv-tools"
NOX = "nox[uv]>=2025.2.9"


def tools_python() -> Path:
    python = TOOLS / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        print(f"run.py: creating {TOOLS.name} with {NOX}", flush=True)
        venv.EnvBuilder(with_pip=True).create(TOOLS)
        subprocess.run([str(python), "-m", "pip", "install", "-q", NOX], check=True)
    return python


def with_pyenv_interpreters(env: dict[str, str]) -> dict[str, str]:
    """`env` with pyenv's CPython 3.10-3.13 on PATH under their plain names (`python3.12`).

    pyenv's shims only answer for the versions made global, so nox would report the
    others missing although they are installed; their own `bin` folders always work.
    """
    versions = Path(env.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    folders = []
    for minor in ("3.10", "3.11", "3.12", "3.13"):
        found = sorted(
            versions.glob(f"{minor}.*/bin/python{minor}"),
            key=lambda p: [int(x) for x in p.parts[-3].split(".") if x.isdigit()],
        )
        if found:
            folders.append(str(found[-1].parent))
    if not folders:
        return env
    return {**env, "PATH": os.pathsep.join([*folders, env.get("PATH", "")])}


def ensure_chromium() -> None:
    """The dashboard's browser tests drive Debian's `chromium`; install it when missing.

    Only through the system's package manager, as root (CI and these machines); a
    browser is never downloaded by a test tool. Elsewhere the tests fail saying so.
    """
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        return
    if os.name != "posix" or os.geteuid() != 0 or not shutil.which("apt-get"):
        print("run.py: chromium is missing; the dashboard's browser tests will fail (apt-get install chromium)")
        return
    print("run.py: installing Debian's chromium for the browser tests", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env)


#: The session that runs in a lane of its own, beside all the other default sessions.
BESIDE = "ml"


def run_lanes(nox: list[str], env: dict[str, str]) -> int:
    """nox's default sessions as two lanes at once: `ml`, and the others in their order.

    `ml` trains for most of its length and keeps both cores busy; the other sessions
    spend much of theirs waiting (on installs from the registries, on builds, on servers,
    on a Ray cluster starting), which one after the other left the CPU idle for a large
    part of the run. Each line is printed with its lane's name; the run fails if either
    lane fails, and each lane's nox prints its own summary.
    """
    listing = subprocess.run([*nox, "--list", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    sessions = [entry["session"] for entry in json.loads(listing.stdout)]
    others = [name for name in sessions if name != BESIDE]
    lanes = {BESIDE: [BESIDE], "rest": others} if BESIDE in sessions else {"rest": others}
    width = max(map(len, lanes))
    print(
        f"run.py: {len(sessions)} sessions in {len(lanes)} lanes: "
        + "; ".join(f"{name}: {' '.join(names)}" for name, names in lanes.items()),
        flush=True,
    )
    started = time.monotonic()
    procs = {
        name: subprocess.Popen(
            [*nox, "-s", *names],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        for name, names in lanes.items()
    }
    ended: dict[str, float] = {}
    lock = threading.Lock()

    def relay(name: str, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with lock:
                sys.stdout.write(f"[{name:<{width}}] {line}")
                sys.stdout.flush()
        proc.wait()
        ended[name] = time.monotonic() - started

    threads = [threading.Thread(target=relay, args=item) for item in procs.items()]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        for proc in procs.values():
            proc.terminate()
        raise
    for name, proc in procs.items():
        outcome = "passed" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
        print(f"run.py: lane {name} {outcome} in {ended[name] / 60:.1f} min", flush=True)
    print(f"run.py: all lanes done in {(time.monotonic() - started) / 60:.1f} min", flush=True)
    return 0 if all(proc.returncode == 0 for proc in procs.values()) else 1


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("test", "demo", "demo-images", "docs-serve"):
        print(__doc__, file=sys.stderr)
        return 2
    command, extra = argv[0], argv[1:]
    nox = [str(tools_python()), "-m", "nox", "-f", str(ROOT / "noxfile.py")]
    if command in ("demo", "demo-images", "docs-serve"):
        nox += ["-s", command.replace("-", "_"), "--", *extra]
    else:
        ensure_chromium()
        if not extra:
            return run_lanes(nox, with_pyenv_interpreters(dict(os.environ)))
        nox += extra
    return subprocess.run(nox, cwd=ROOT, env=with_pyenv_interpreters(dict(os.environ))).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
