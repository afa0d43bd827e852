"""`python3 run.py test` (the README's test command) runs nox's default sessions in two lanes.

A stand-in for nox (a real subprocess answering `--list --json` and `-s ...` as nox does)
shows what `run_lanes` does with it: which sessions go to which lane, that the lanes run
at the same time, that every line says its lane, and that one failing lane fails the run.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Sessions in nox's order, as `nox --list --json` prints the default ones.
SESSIONS = ["lint", "ml", "tests(3.11-core)", "ray"]


def load_run_py():
    spec = importlib.util.spec_from_file_location("run_py", ROOT / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_nox(tmp_path: Path, fail: str = "") -> list[str]:
    """A nox that lists `SESSIONS`, and runs a lane by printing its sessions.

    The `ml` lane waits until the other lane has started (a file it writes), so a run
    that started the lanes one after the other would fail here, not hang.
    """
    script = tmp_path / "nox.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, sys, time
            from pathlib import Path
            args = sys.argv[1:]
            if args == ["--list", "--json"]:
                print(json.dumps([{{"session": name}} for name in {SESSIONS!r}]))
                sys.exit(0)
            assert args[0] == "-s", args
            names = args[1:]
            started = Path({str(tmp_path / "rest-started")!r})
            if names == ["ml"]:
                deadline = time.monotonic() + 30
                while not started.exists():
                    if time.monotonic() > deadline:
                        print("the other lane never started"); sys.exit(3)
                    time.sleep(0.05)
            else:
                started.write_text("")
            for name in names:
                print(f"nox > Running session {{name}}")
            sys.exit(1 if {fail!r} in names else 0)
            """
        )
    )
    return [sys.executable, str(script)]


def test_ml_runs_in_its_own_lane_beside_the_others(tmp_path, capsys):
    run = load_run_py()
    assert run.run_lanes(fake_nox(tmp_path), env={}) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "[ml  ] nox > Running session ml" in lines
    rest = [line for line in lines if line.startswith("[rest] ")]
    assert rest == [f"[rest] nox > Running session {name}" for name in ["lint", "tests(3.11-core)", "ray"]]
    assert "run.py: lane ml passed" in "\n".join(lines)


def test_one_failing_lane_fails_the_run_and_says_which(tmp_path, capsys):
    run = load_run_py()
    assert run.run_lanes(fake_nox(tmp_path, fail="ray"), env={}) == 1
    out = capsys.readouterr().out
    assert "run.py: lane rest FAILED (exit 1)" in out
    assert "run.py: lane ml passed" in out
