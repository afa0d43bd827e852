"""A plugin grader in a process of its own, so that its time limit bounds its work.

A grader is user code. One that holds the GIL (a `re` match that backtracks without
end, a loop in a C extension) stops every thread of the job when it runs on a thread:
the time limit's wait, the job's background writers and `runs stop` included, until
the provider's own limit kills the container hours later. In a child process the limit
is the job's wait on a pipe, which nothing in the child can hold up; a call that runs
past it has its process killed (its CPU work ends with it) and fails the run naming the
grader and the example, and the next call starts a fresh process.

The child loads the grader by name (`registry.load_grader`) with the parent's
``sys.path``, or runs an OpenAI python grader's source sent as its first message; requests and answers are length-prefixed pickles over its stdin and
stdout (the grader's own prints go to the job's log through stderr).
"""

from __future__ import annotations

import os
import pickle
import select
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from trainkit_core.errors import PluginLoadError

_HEADER = 8
#: The child's argument for a grader whose source comes as the first message.
PYTHON_SOURCE = "--python-source"


def _send(stream: Any, message: Any) -> None:
    data = pickle.dumps(message)
    stream.write(len(data).to_bytes(_HEADER, "big") + data)
    stream.flush()


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes | None:
    """`size` bytes from `fd`; None at end of file or once `deadline` (monotonic) passed."""
    chunks, left = [], size
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                return None
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int, deadline: float | None = None) -> tuple[bool, Any]:
    """(True, message), or (False, None) at end of file or past `deadline`."""
    header = _read_exactly(fd, _HEADER, deadline)
    if header is None:
        return False, None
    body = _read_exactly(fd, int.from_bytes(header, "big"), deadline)
    return (False, None) if body is None else (True, pickle.loads(body))


class GraderProcess:
    """Calls of one plugin grader, each in the grader's child process, each bounded in time.

    With `source`, the grader is an OpenAI python grader's code (`openai_graders`): the child
    runs it and calls its ``grade(sample, item)``.
    """

    def __init__(self, name: str, source: str | None = None) -> None:
        self.name = name
        self.source = source
        self._proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        what = PYTHON_SOURCE if self.source is not None else self.name
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainkit_core.rewards.process", what],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None and proc.stdin is not None
        if self.source is not None:
            _send(proc.stdin, self.source)
        ok, message = _receive(proc.stdout.fileno(), time.monotonic() + 300)
        if not ok or message[0] != "ready":
            self._kill(proc)
            detail = f"{type(message[1]).__name__}: {message[1]}" if ok else "its process did not start"
            what = "python grader" if self.source is not None else "grader plugin"
            raise PluginLoadError(f"{what} {self.name!r} failed to load in its own process: {detail}")
        return proc

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def close(self) -> None:
        if self._proc is not None:
            self._kill(self._proc)
            self._proc = None

    def outcomes(self, calls: Sequence[tuple[str, Mapping[str, Any]]], timeout_s: float) -> list[dict[str, Any]]:
        """Per call ``{"value": v}`` or ``{"error": exc}``; a call past `timeout_s` is ``{"timeout": True}``
        and ends the list (its process is killed)."""
        found: list[dict[str, Any]] = []
        for completion, example in calls:
            if self._proc is None:
                self._proc = self._start()
            assert self._proc.stdin is not None and self._proc.stdout is not None
            try:
                _send(self._proc.stdin, (completion, dict(example)))
                ok, message = _receive(self._proc.stdout.fileno(), time.monotonic() + timeout_s)
            except (BrokenPipeError, OSError) as exc:
                ok, message = True, ("error", RuntimeError(f"the grader's process died: {exc}"))
            if not ok:
                died = self._proc.poll() is not None
                self.close()
                if died:
                    found.append({"error": RuntimeError("the grader's process died")})
                else:
                    found.append({"timeout": True})
                return found
            kind, payload = message
            found.append({"value": payload} if kind == "value" else {"error": payload})
            if kind != "value":
                return found
        return found


def _picklable(value: Any, fallback: Any) -> Any:
    try:
        pickle.dumps(value)
    except Exception:
        return fallback
    return value


def python_grader(source: str) -> Any:
    """A trainkit grader of an OpenAI python grader's source: its ``grade(sample, item)``, run here."""
    import json

    namespace: dict[str, Any] = {"__name__": "openai_python_grader"}
    exec(compile(source, "<python grader>", "exec"), namespace)  # the code the caller sent, in this child only
    grade = namespace["grade"]

    def grader(completion: str, example: Mapping[str, Any]) -> float:
        try:
            output_json = json.loads(completion)
        except ValueError:
            output_json = None
        return float(grade({"output_text": completion, "output_json": output_json}, dict(example)))

    return grader


def main() -> None:
    """The child: load the grader named in argv (or sent as source), then answer requests until stdin ends."""
    from trainkit_core.rewards.registry import load_grader

    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # the grader's prints must not reach the pipe
    fd = sys.stdin.fileno()
    try:
        if sys.argv[1] == PYTHON_SOURCE:
            ok, source = _receive(fd)
            if not ok:
                return
            grader = python_grader(source)
        else:
            grader = load_grader(sys.argv[1])
    except BaseException as exc:
        _send(out, ("error", _picklable(exc, RuntimeError(f"{type(exc).__name__}: {exc}"))))
        return
    _send(out, ("ready", None))
    while True:
        ok, message = _receive(fd)
        if not ok:
            return
        completion, example = message
        try:
            value = grader(completion, example)
        except BaseException as exc:
            _send(out, ("error", _picklable(exc, RuntimeError(f"{type(exc).__name__}: {exc}"))))
            continue
        _send(out, ("value", _picklable(value, f"<{type(value).__name__} that cannot be sent>")))


if __name__ == "__main__":
    main()
