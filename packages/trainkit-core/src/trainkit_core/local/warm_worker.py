"""The warm local inference worker (`python -m trainkit_core.local.warm_worker`).

A long-lived process, started on first use by `trainkit_core.local.inference_server`, that
keeps loaded models in a `ModelCache` and answers generation requests over HTTP on
127.0.0.1 (a free port). It records its pid, port and a random token in
``<TRAINKIT_HOME>/inference/worker.json`` (mode 0600: only its user can call it) and
exits, removing the record, after ``TRAINKIT_INFER_IDLE_TIMEOUT_S`` without a request.

Routes: ``GET /health`` (loads so far, loaded models), ``POST /generate`` (one JSON
answer), ``POST /stream`` (one JSON event per line). Every request carries the token
in ``X-Trainkit-Token``. ``HF_HOME`` points at the hf-cache volume, as in the jobs.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from trainkit_core.errors import TrainkitError
from trainkit_core.inference.request import MAX_REQUEST_BYTES
from trainkit_core.local.inference_server import TOKEN_HEADER, record_path

log = logging.getLogger(__name__)

#: The largest body read: what a request within `GenerateRequest`'s bounds can take (the
#: client validated it). Smaller, a valid long prompt or a few pictures met a closed
#: connection ("broken pipe") instead of an answer.
MAX_BODY = MAX_REQUEST_BYTES


def error_body(exc: BaseException) -> tuple[int, dict[str, Any]]:
    if isinstance(exc, TrainkitError):
        return exc.http_status, {"error": exc.message, "type": type(exc).__name__, "hint": exc.hint}
    return 500, {"error": f"{type(exc).__name__}: {exc}", "type": "JobError", "hint": None}


def token_ok(given: str | None, expected: str) -> bool:
    """Constant-time check of the worker token, compared as bytes.

    `secrets.compare_digest` raises `TypeError` on two `str` holding non-ASCII text,
    and a header may hold any byte (http.server decodes them as Latin-1): such a
    header is a wrong token (401), never a traceback.
    """
    if given is None:
        return False
    return secrets.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8"))


class WarmWorker:
    """The worker's state: the model cache, the token and the idle clock."""

    def __init__(self, home: Path, idle_timeout_s: float) -> None:
        from trainkit_core.inference.loading import ModelCache
        from trainkit_core.local.plugin import job_context
        from trainkit_core.settings import Settings

        ctx = job_context(Settings.from_env(), "warm-inference")
        os.environ["HF_HOME"] = str(ctx.path("hf-cache"))  # before transformers is imported, as the jobs do
        self.home = Path(home)
        self.cache = ModelCache(ctx.path("models"), ctx.path("hf-cache"))
        self.idle_timeout_s = float(idle_timeout_s)
        self.token = secrets.token_urlsafe(24)
        self.requests = 0
        self.active = 0
        self.last_activity = time.monotonic()
        self.started_at = time.time()
        self._lock = threading.Lock()

    def touch(self, delta: int) -> None:
        with self._lock:
            self.active += delta
            self.last_activity = time.monotonic()
            if delta > 0:
                self.requests += 1

    def idle_for(self) -> float:
        with self._lock:
            return 0.0 if self.active else time.monotonic() - self.last_activity

    def health(self) -> dict[str, Any]:
        return {
            "ok": True,
            "pid": os.getpid(),
            "started_at": self.started_at,
            "idle_timeout_s": self.idle_timeout_s,
            "requests": self.requests,
            "loads": self.cache.loads,
            "adapter_loads": self.cache.adapter_loads,
            "loaded": self.cache.loaded(),
        }


def _handler(worker: WarmWorker) -> type[BaseHTTPRequestHandler]:
    from trainkit_core.inference.generation import generate, stream_tokens
    from trainkit_core.inference.request import GenerateRequest

    class Handler(BaseHTTPRequestHandler):
        server_version = "trainkit-infer"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s " + format, self.address_string(), *args)

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if not token_ok(self.headers.get(TOKEN_HEADER), worker.token):
                self._send(401, {"error": "missing or wrong worker token", "type": "UsageError"})
            elif self.path == "/health":
                self._send(200, worker.health())
            else:
                self._send(404, {"error": f"no route {self.path}", "type": "NotFoundError"})

        def do_POST(self) -> None:
            if not token_ok(self.headers.get(TOKEN_HEADER), worker.token):
                self._send(401, {"error": "missing or wrong worker token", "type": "UsageError"})
                return
            if self.path not in ("/generate", "/stream"):
                self._send(404, {"error": f"no route {self.path}", "type": "NotFoundError"})
                return
            worker.touch(+1)
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    error = f"request body of {length} bytes, over the worker's limit of {MAX_BODY}"
                    self._send(413, {"error": error, "type": "InputTooLargeError"})
                    return
                try:
                    req = GenerateRequest.parse(json.loads(self.rfile.read(length) or b"{}"))
                    loaded = worker.cache.get(req.model_path or "")
                except Exception as exc:
                    self._send(*error_body(exc))
                    return
                if self.path == "/generate":
                    try:
                        self._send(200, generate(loaded, req))
                    except Exception as exc:
                        self._send(*error_body(exc))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.end_headers()
                try:
                    for event in stream_tokens(loaded, req):
                        self.wfile.write(json.dumps(event).encode() + b"\n")
                        self.wfile.flush()
                except Exception as exc:
                    status, body = error_body(exc)
                    # The event's "type" is "error"; the exception's class goes in "error_type" (in the
                    # one dict, it overwrote "type", and the client took the error for a plain event).
                    event = {**body, "type": "error", "error_type": body["type"], "status": status}
                    self.wfile.write(json.dumps(event).encode() + b"\n")
            finally:
                worker.touch(-1)

    return Handler


def _write_record(home: Path, data: dict[str, Any]) -> None:
    path = record_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out)
    os.replace(tmp, path)


def _remove_record(home: Path) -> None:
    path = record_path(home)
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def serve(home: Path, idle_timeout_s: float) -> int:
    """Run until idle for `idle_timeout_s`; returns the exit status."""
    from trainkit_core.toolkit.processes import process_start_time

    worker = WarmWorker(home, idle_timeout_s)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(worker))
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    _write_record(
        home,
        {
            "pid": os.getpid(),
            "pid_start": process_start_time(os.getpid()),
            "port": port,
            "token": worker.token,
            "started_at": worker.started_at,
            "idle_timeout_s": idle_timeout_s,
        },
    )
    print(f"trainkit: warm inference worker pid {os.getpid()} on 127.0.0.1:{port}", flush=True)

    def watch() -> None:
        while worker.idle_for() < worker.idle_timeout_s:
            time.sleep(min(0.2, worker.idle_timeout_s / 4))
        print(f"trainkit: idle for {worker.idle_timeout_s:g} s, exiting", flush=True)
        _remove_record(home)
        httpd.shutdown()

    threading.Thread(target=watch, name="idle-watch", daemon=True).start()
    try:
        httpd.serve_forever(poll_interval=0.1)
    finally:
        _remove_record(home)
        httpd.server_close()
    return 0


def main() -> int:
    from trainkit_core.settings import Settings

    settings = Settings.from_env()
    home = Path(settings.provider.home).expanduser()
    return serve(home, settings.compute.infer_idle_timeout_s)


if __name__ == "__main__":
    sys.exit(main())
