"""Helpers of the API tests: a real uvicorn server on 127.0.0.1, and an SSE parser.

The server runs in a thread of the test process, so tests can write run records and
events into the same local store the server reads; jobs it starts are real detached
processes (the local provider's), like any other run.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from trainkit_api.app import create_app
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import ApiSettings, ProviderSettings, Settings

TOKEN = "test-token-5f1d0c"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    token: str | None
    settings: Settings
    provider: Provider
    app: Any

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, **{"timeout": 60, **kwargs})

    @property
    def store(self) -> RunStore:
        return RunStore.for_provider(self.provider)

    def new_run(self, **fields: Any) -> TrainingRun:
        """A run record written straight into the store (no job behind it)."""
        from trainkit_core.ids import new_run_id

        run = TrainingRun(id=fields.pop("id", None) or new_run_id(), provider="local", created_at=time.time(), **fields)
        run.attach(self.store).save()
        return run


def settings_for(home: Path, token: str | None) -> Settings:
    return Settings(provider=ProviderSettings(home=home), api=ApiSettings(api_token=token))


def ml_settings(home: Path, datasets: Path, *, idle_s: float = 15, **compute: Any) -> Settings:
    """A server of its own for a module that trains: its home, its datasets, a warm worker that ends soon."""
    from trainkit_core.settings import ComputeSettings, DatasetSettings

    return Settings(
        provider=ProviderSettings(home=home),
        datasets=DatasetSettings(datasets_dir=datasets),
        compute=ComputeSettings(infer_idle_timeout_s=idle_s, **compute),
        api=ApiSettings(api_token=TOKEN),
    )


def serve(settings: Settings) -> Iterator[Server]:
    """Start uvicorn in a thread; stop it when the generator is closed."""
    provider = get_provider("local", settings)
    app = create_app(settings, provider=provider)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the API server did not start")
        time.sleep(0.02)
    token = settings.api.api_token.get_secret_value() if settings.api.api_token else None
    try:
        yield Server(f"http://127.0.0.1:{port}", token, settings, provider, app)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """Parse a `text/event-stream` body into {"id", "event", "data"} dicts (data JSON-decoded)."""
    fields: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if "data" in fields:
                yield fields
            fields = {}
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                fields[name] = value if value == "[DONE]" else json.loads(value)
            else:
                fields[name] = value
