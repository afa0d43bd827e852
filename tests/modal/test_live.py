"""Against the real Modal service (needs credentials): deploy, ping, the 4b GPU ping, train `tiny`, retry, the web endpoint, stop.

Not part of any default run. `nox -s modal_live` runs it for anyone logged in to
Modal (`modal token new`, or MODAL_TOKEN_ID / MODAL_TOKEN_SECRET). It deploys a
throw-away app (`trainkit-live-<random>`) with its own volumes, so it never touches
your own trainkit app, and stops the app at the end. The first run builds the
images (several minutes). The web endpoint is checked as a user meets it: the
dashboard at its URL, and a `tiny` run started with `POST /v1/runs` that succeeds.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.modal_live

REPO = Path(__file__).resolve().parents[2]
#: The throw-away app's API token (its web endpoint is public for the test's minutes).
LIVE_TOKEN = uuid.uuid4().hex


def _has_credentials() -> bool:
    if os.environ.get("MODAL_TOKEN_ID") and os.environ.get("MODAL_TOKEN_SECRET"):
        return True
    config = Path(os.environ.get("MODAL_CONFIG_PATH") or Path.home() / ".modal.toml")
    return config.is_file() and "token_id" in config.read_text()


@pytest.fixture(scope="module")
def live() -> Iterator[object]:
    if os.environ.get("TRAINKIT_MODAL_LIVE") != "1" or not _has_credentials():
        pytest.skip("needs Modal credentials and TRAINKIT_MODAL_LIVE=1 (run `nox -s modal_live`)")
    from trainkit_core import Settings, get_provider

    tag = uuid.uuid4().hex[:6]
    mp = pytest.MonkeyPatch()
    mp.setenv("TRAINKIT_PROVIDER", "modal")
    mp.setenv("TRAINKIT_APP_NAME", f"trainkit-live-{tag}")
    for kind in ("data", "models", "eval", "hf_cache"):
        mp.setenv(f"TRAINKIT_VOL_{kind.upper()}", f"trainkit-live-{kind.replace('_', '-')}")
    mp.setenv("TRAINKIT_DATASETS_DIR", str(REPO / "datasets"))
    mp.setenv("TRAINKIT_API_TOKEN", LIVE_TOKEN)
    provider = get_provider("modal", Settings.from_env())
    deployment = provider.deployment()
    try:
        status = deployment.deploy()
        assert status.state == "deployed", status
        assert status.detail["missing"] == []  # classes count as deployed (`Inference_<size>.*`)
        assert status.url, status
        provider.live_url = status.url  # type: ignore[attr-defined]
        yield provider
    finally:
        try:
            deployment.stop()
            assert deployment.status().state == "stopped"  # found again by the app id kept at deploy
        finally:
            mp.undo()


def test_ping(live: object) -> None:
    result = live.spawn("ping", echo="live").wait(timeout=900)  # type: ignore[attr-defined]
    assert result["ok"] and result["provider"] == "modal" and result["echo"] == "live"
    assert all(v["exists"] for v in result["volumes"].values())
    assert result["call_id"].startswith("fc-")


def test_train_tiny_a_few_steps(live: object) -> None:
    from trainkit_core.training.submit import start_run

    run = start_run(live, {"dataset": "demo", "model_size": "tiny", "steps": 5})
    assert run.call_id and run.call_id.startswith("fc-")
    assert run.provider_app_id.startswith("ap-") and run.deployment_id.startswith(run.provider_app_id)
    done = run.wait(timeout=3600)
    assert done.status == "succeeded", done.error_message
    assert live.volume("models").exists(f"trained/{run.id}")  # type: ignore[attr-defined]


def test_gpu_ping_of_the_tiny_size(live: object) -> None:
    """The GPU check in the training image (tiny runs on CPU: no CUDA, but torch is there)."""
    result = live.spawn("gpu_ping", model_size="tiny").wait(timeout=1800)  # type: ignore[attr-defined]
    assert result["provider"] == "modal" and result["model_size"] == "tiny"
    assert result["torch"] and result["gpu"] is None
    assert set(result["packages"]) == {"bitsandbytes", "unsloth"}


def test_the_train_image_builds_and_the_4b_gpu_ping_reports_the_cuda_device(live: object) -> None:
    """The locked train image (CUDA 13.0 torch from its index, the rest from PyPI, --no-deps) on the 4b GPU.

    The first deploy could not build this image. This is the only check of the
    CUDA build itself; the resolution is checked offline (`nox -s modal_resolve`).
    """
    from trainkit_modal.locking import read_lock

    result = live.spawn("gpu_ping", model_size="4b").wait(timeout=3600)  # type: ignore[attr-defined]
    print("gpu_ping 4b:", result)  # the device, torch and CUDA, for the record (-s)
    lock = read_lock("train")
    assert result["torch"] == lock.version_of("torch"), result
    assert result["cuda"] and result["cuda"].startswith("13."), result
    assert result["cuda_available"] is True and result["gpu"]["count"] >= 1, result
    assert result["packages"]["bitsandbytes"]["ok"], result["packages"]
    assert result["packages"]["unsloth"]["ok"], result["packages"]


def test_a_failed_attempt_is_retried_and_the_retry_resumes(live: object) -> None:
    """Attempt 1 fails (the dataset's pointer is taken off the data volume just after the spawn);
    once it is back, Modal's retry runs attempt 2 in a fresh container, which resumes and succeeds."""
    from trainkit_core.datasets.layout import current_path
    from trainkit_core.training.submit import start_run

    data = live.volume("data")  # type: ignore[attr-defined]
    run = start_run(live, {"dataset": "demo", "model_size": "tiny", "steps": 5})
    pointer = current_path("demo")
    saved = data.read_bytes(pointer)
    data.remove(pointer)
    try:
        deadline = time.monotonic() + 1800
        while not run.reload().done() and not (run.status == "pending" and run.error_message):
            assert time.monotonic() < deadline, f"run {run.id} still {run.status}"
            time.sleep(0.5)
    finally:
        data.write_bytes(pointer, saved)  # before Modal's retry (10 s of backoff)
    if run.status == "succeeded" and run.call_attempts == 1:
        pytest.skip("attempt 1 read the dataset before its pointer was taken away: nothing to retry")
    assert "never synced" in (run.error_message or ""), run.error_message
    done = run.wait(timeout=3600)
    assert done.status == "succeeded", done.error_message
    assert done.call_attempts == 2 and done.max_attempts == 3
    retried = [e for e in done.events.read() if e["type"] == "status" and e.get("retrying")]
    assert len(retried) == 1 and "never synced" in retried[0]["error"]
    assert live.call(done.call_id).status().state == "succeeded"  # type: ignore[attr-defined]


def _web(live: object, timeout: float = 120) -> object:
    import httpx

    return httpx.Client(
        base_url=live.live_url,  # type: ignore[attr-defined]
        headers={"Authorization": f"Bearer {LIVE_TOKEN}"},
        timeout=timeout,
        follow_redirects=True,
    )


def test_the_web_endpoint_serves_the_dashboard(live: object) -> None:
    with _web(live, timeout=600) as client:  # the first request starts a container
        page = client.get("/")
        script = client.get("/static/app.js")
    assert page.status_code == 200 and "<html" in page.text.lower(), page.text[:300]
    assert script.status_code == 200 and len(script.content) > 100


def test_a_job_started_from_the_web_endpoint_succeeds(live: object) -> None:
    """`POST /v1/runs` routes the run from the web container (no package metadata there) to `train_tiny`."""
    import time

    from trainkit_core.datasets.sync import sync_dataset

    sync_dataset(live, "demo")  # type: ignore[arg-type]
    with _web(live, timeout=600) as client:
        created = client.post("/v1/runs", json={"dataset": "demo", "model_size": "tiny", "steps": 5})
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        deadline = time.monotonic() + 3600
        while True:
            record = client.get(f"/v1/runs/{run_id}").json()
            if record["status"] in ("succeeded", "failed", "stopped", "cancelled"):
                break
            assert time.monotonic() < deadline, record
            time.sleep(10)
        assert record["status"] == "succeeded", record
        answer = client.post(
            "/v1/generate", json={"model_path": f"trained/{run_id}", "prompt": "hi", "max_new_tokens": 8}
        )
        assert answer.status_code == 200, answer.text
