"""The warm local inference worker: started on first use, reused, exits when idle.

A second request skips the model load (the worker's load counter stays at 1 and the
answer says `cached`); the worker validates model paths itself; and it exits, removing
its record, after TRAINKIT_INFER_IDLE_TIMEOUT_S without requests. Speed is measured in
`bench/bench_warm_inference.py`, not asserted here.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.ml

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

from trainkit_fake_models import make_fake_model  # noqa: E402


def test_warm_worker_reuses_models_refuses_bad_paths_and_exits_when_idle(
    trainkit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainkit_core import get_provider
    from trainkit_core.errors import NotFoundError, UsageError
    from trainkit_core.inference import client
    from trainkit_core.local.inference_server import TOKEN_HEADER, read_record, record_path
    from trainkit_core.local.runner import process_start_time

    monkeypatch.setenv("TRAINKIT_INFER_IDLE_TIMEOUT_S", "4")
    volumes = trainkit_home / "volumes"
    model_path = make_fake_model(volumes / "trainkit-models", volumes / "trainkit-hf-cache")
    provider = get_provider("local")
    server = provider.inference_server()
    assert server is not None and provider.capabilities.warm_inference

    request = {"model_path": model_path, "prompt": "Uppercase: snow blue", "max_new_tokens": 8}
    first = client.generate(provider, request)
    record = read_record(trainkit_home)
    assert record is not None and record["port"] > 0
    assert oct(record_path(trainkit_home).stat().st_mode & 0o777) == "0o600"
    second = client.generate(provider, request)
    assert first["cached"] is False and second["cached"] is True
    assert second["text"] == first["text"]
    health = server.status()
    assert health["loads"] == 1 and health["adapter_loads"] == 1 and health["requests"] == 2
    assert read_record(trainkit_home)["pid"] == record["pid"]  # the same worker answered

    events = list(client.stream(provider, {**request, "base": True}))
    assert events[-1]["type"] == "done" and events[-1]["base"] is True
    assert "".join(e["text"] for e in events if e["type"] == "token") == events[-1]["text"]

    # The worker validates paths itself, whatever a client sends.
    with pytest.raises(UsageError, match=r"contains '\.\.'"):
        server.generate({**request, "model_path": "trained/../../etc/passwd"})
    with pytest.raises(NotFoundError):
        server.generate({**request, "model_path": "trained/run-20990101-000000-abcdef"})
    bad_token = urllib.request.Request(
        f"http://127.0.0.1:{record['port']}/generate",
        data=json.dumps(request).encode(),
        headers={TOKEN_HEADER: "wrong"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(bad_token, timeout=30)
    assert info.value.code == 401

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process_start_time(record["pid"]) is not None:
        time.sleep(0.2)
    assert process_start_time(record["pid"]) is None, "the worker did not exit after the idle timeout"
    assert not record_path(trainkit_home).exists()
    assert "idle for 4 s, exiting" in (trainkit_home / "inference" / "worker.log").read_text()
