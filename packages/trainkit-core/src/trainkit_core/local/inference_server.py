"""Client side of the warm local inference worker: find it, start it, call it.

The local provider's `inference_server` answer. The first request starts the worker
(`trainkit_core.local.warm_worker`) as a detached process; later requests find it
through its record in ``<TRAINKIT_HOME>/inference/worker.json`` while it lives.
A file lock keeps two commands from starting two workers. Standard library only.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainkit_core import errors
from trainkit_core.errors import ProviderError
from trainkit_core.toolkit.processes import alive

START_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 1800.0
TOKEN_HEADER = "X-Trainkit-Token"


def worker_dir(home: Path) -> Path:
    return Path(home) / "inference"


def record_path(home: Path) -> Path:
    return worker_dir(home) / "worker.json"


@contextmanager
def _start_lock(home: Path) -> Iterator[None]:
    folder = worker_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "worker.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_record(home: Path) -> dict[str, Any] | None:
    """The running worker's record, or None when there is none or its process is gone."""
    try:
        record = json.loads(record_path(home).read_text())
    except (OSError, ValueError):
        return None
    if not alive(record.get("pid"), record.get("pid_start")):
        return None
    return record  # type: ignore[no-any-return]


def _url(record: Mapping[str, Any], route: str) -> str:
    return f"http://127.0.0.1:{int(record['port'])}{route}"


def health(record: Mapping[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
    req = urllib.request.Request(_url(record, "/health"), headers={TOKEN_HEADER: str(record.get("token", ""))})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _raise_from(status: int, body: Mapping[str, Any]) -> None:
    cls = getattr(errors, str(body.get("type") or ""), None)
    if not (isinstance(cls, type) and issubclass(cls, errors.TrainkitError)):
        cls = errors.JobError
    raise cls(str(body.get("error") or f"inference worker answered {status}"), hint=body.get("hint"))


class LocalInferenceServer:
    """The warm worker of the local provider, started on first use."""

    def __init__(self, home: Path, idle_timeout_s: int) -> None:
        self.home = Path(home)
        self.idle_timeout_s = idle_timeout_s

    def ensure(self) -> dict[str, Any]:
        """The live worker's record, starting a worker when none answers."""
        record = read_record(self.home)
        if record is not None and health(record) is not None:
            return record
        with _start_lock(self.home):
            record = read_record(self.home)
            if record is not None and health(record) is not None:
                return record
            return self._start()

    def _start(self) -> dict[str, Any]:
        log_path = worker_dir(self.home) / "worker.log"
        from trainkit_core.settings import child_environ

        env = {
            **child_environ(),  # without TRAINKIT_API_TOKEN
            "TRAINKIT_HOME": str(self.home.resolve()),
            "TRAINKIT_INFER_IDLE_TIMEOUT_S": str(self.idle_timeout_s),
        }
        record_path(self.home).unlink(missing_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "trainkit_core.local.warm_worker"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            record = read_record(self.home)
            if record is not None and record.get("pid") == proc.pid and health(record) is not None:
                return record
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise ProviderError(f"the warm inference worker exited with code {proc.returncode}:\n{tail}")
            time.sleep(0.1)
        proc.kill()
        raise ProviderError(f"the warm inference worker did not start within {START_TIMEOUT_S:g} s (log: {log_path})")

    def _post(self, route: str, request: Mapping[str, Any]) -> Any:
        record = self.ensure()
        req = urllib.request.Request(
            _url(record, route),
            data=json.dumps(dict(request)).encode(),
            headers={"Content-Type": "application/json", TOKEN_HEADER: record["token"]},
            method="POST",
        )
        try:
            return urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S)
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read())
            except ValueError:
                body = {}
            _raise_from(exc.code, body)
        except OSError as exc:
            raise ProviderError(f"could not reach the warm inference worker: {exc}") from None

    def generate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        with self._post("/generate", request) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def stream(self, request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        with self._post("/stream", request) as resp:
            for line in resp:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "error":
                    _raise_from(int(event.get("status", 500)), {**event, "type": event.get("error_type")})
                yield event

    def status(self) -> dict[str, Any] | None:
        """The worker's health answer, or None when no worker runs (starts nothing)."""
        record = read_record(self.home)
        return None if record is None else health(record)
