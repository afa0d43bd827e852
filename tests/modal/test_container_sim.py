"""The Modal app run in simulated containers as strict as Modal's (`tests/modal/container_sim/`).

Each image of the app becomes a venv with exactly its declared packages (CPU torch
standing in for CUDA torch; GPU-only wheels left out) and a `/root` holding only the
files its `add_local_python_source` mounts upload, with no trainkit distribution
installed; functions and classes are the bytes Modal would ship, loaded with modal's own
deserializer in the image's Python; only the SDK objects that would reach Modal's
servers are fakes (`fake_modal.py`). In there: the web function's ASGI app serves the
dashboard, starts a `tiny` run from `POST /v1/runs` that trains in the train image,
answers `/v1/generate` from the inference class (its `@modal.enter`, then `generate`),
runs an eval; `ping` runs in the light image.

The `container_sim` marker keeps it out of the per-Python `tests` sessions: it runs in
its own default nox session, `modal_container`, on the images' Python.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.container_sim

httpx = pytest.importorskip("httpx")
pytest.importorskip("trainkit_api")

REPO = Path(__file__).resolve().parents[2]
TOKEN = "sim-token-7c1e"
STEPS = 20
#: A body limit of the deploying machine's settings, which the deployed API must keep.
MAX_BODY = 300_000
#: Modal's web limit (150 s; the app answers within 120 s), scaled down: a cold inference
#: container's `@modal.enter` (imports and model load: seconds here) takes longer.
ANSWER_WITHIN_S = 1.0
#: The fine-tuning job statuses after which nothing changes.
ENDED = ("succeeded", "failed", "cancelled")


def _dataset(root: Path) -> Path:
    """48 demo conversations and 4 eval ones (the eval splits stay small: CI time)."""
    folder = root / "simdemo"
    folder.mkdir(parents=True)
    demo = REPO / "datasets" / "demo"
    (folder / "train.jsonl").write_text("\n".join((demo / "train.jsonl").read_text().splitlines()[:48]) + "\n")
    (folder / "eval.jsonl").write_text("\n".join((demo / "eval.jsonl").read_text().splitlines()[:4]) + "\n")
    (folder / "dataset.toml").write_text(
        'name = "simdemo"\ndescription = "Uppercasing."\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )
    return root


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Deployed:
    def __init__(self, sim: Any, provider: Any, url: str, root: Path, web_log: Path) -> None:
        self.sim, self.provider, self.url, self.root, self.web_log = sim, provider, url, root, web_log

    def client(self, timeout: float = 120.0) -> Any:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout)

    def logs(self) -> str:
        """The web container's output and every call's, for a failing assertion's message."""
        parts = [f"--- web container\n{self.web_log.read_text()[-4000:]}"]
        for log in sorted((self.root / "calls").glob("*.log")):
            record = json.loads(log.with_suffix(".json").read_text())
            parts.append(f"--- {record['name']} ({log.stem}): {record['state']}\n{log.read_text()[-4000:]}")
        return "\n".join(parts)


def _live_line(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Print past pytest's capture: a first build of the images' environments takes minutes."""
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled():
            print(line, flush=True)

    return say


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Deployed]:
    import fake_modal
    from container_sim.deploy import deploy_sim

    from trainkit_core.datasets.sync import sync_dataset
    from trainkit_core.plugins.manager import build_plugin_manager, register
    from trainkit_core.plugins.provider import get_provider
    from trainkit_core.settings import Settings
    from trainkit_modal.plugin import ModalPlugin

    root = tmp_path_factory.mktemp("sim") / "fake-modal"
    mp = pytest.MonkeyPatch()
    mp.setenv("FAKE_MODAL_ROOT", str(root))
    for key in [k for k in os.environ if k.startswith("TRAINKIT_")]:
        mp.delenv(key)
    mp.setenv("TRAINKIT_PROVIDER", "modal")
    mp.setenv("TRAINKIT_API_TOKEN", TOKEN)
    mp.setenv("TRAINKIT_API_MAX_BODY_BYTES", str(MAX_BODY))
    mp.setenv("TRAINKIT_DATASETS_DIR", str(_dataset(tmp_path_factory.mktemp("datasets"))))
    web = None
    try:
        settings = Settings.from_env()
        sim = deploy_sim(settings, root, say=_live_line(request))
        pm = build_plugin_manager(load_entry_points=False)
        register(pm, ModalPlugin(lambda: fake_modal), name="modal", module="trainkit_modal.plugin")
        provider = get_provider("modal", settings, pm=pm)
        sync_dataset(provider, "simdemo")

        port = _free_port()
        web_log = root / "web.log"
        from trainkit_modal.web import ANSWER_WITHIN_VARIABLE

        web = sim.start_web(port, web_log, env={ANSWER_WITHIN_VARIABLE: str(ANSWER_WITHIN_S)})
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert web.poll() is None, f"the web container exited:\n{web_log.read_text()[-6000:]}"
            assert time.monotonic() < deadline, f"the web container never answered:\n{web_log.read_text()[-6000:]}"
            time.sleep(0.5)
        yield Deployed(sim, provider, url, root, web_log)
    finally:
        if web is not None:
            web.terminate()
            try:
                web.wait(timeout=10)
            except subprocess.TimeoutExpired:
                web.kill()
        mp.undo()


def test_images_hold_no_trainkit_distribution(deployed: Deployed) -> None:
    """As in a Modal container: the sources are there, the distributions (and their metadata) are not."""
    for image, env in deployed.sim.envs.items():
        probe = (
            "import importlib.metadata as m, importlib.util as u\n"
            "missing = []\n"
            "for d in ('trainkit-core', 'trainkit-modal', 'trainkit-api', 'trainkit-cli'):\n"
            "    try: m.distribution(d)\n"
            "    except m.PackageNotFoundError: missing.append(d)\n"
            "print(len(missing), u.find_spec('trainkit_core') is None)\n"
        )
        clean = {"PATH": os.environ["PATH"]}  # the venv alone, as the image: no PYTHONPATH, no /root
        done = subprocess.run(
            [str(env.python), "-c", probe], capture_output=True, text=True, cwd="/", env=clean, timeout=120
        )
        assert done.stdout.split() == ["4", "True"], (image, done.stdout, done.stderr)


def test_sources_laid_out_as_the_mounts_upload_them(deployed: Deployed) -> None:
    web = deployed.sim.files["web"]
    assert "root/trainkit_core/__init__.py" in web and "root/trainkit_modal/container.py" in web
    assert "root/trainkit_api/static/index.html" in web and "root/trainkit_api/static/app.js" in web
    assert not [f for f in web if f.endswith(".pyc") or "__pycache__" in f]
    for image in ("train", "infer"):
        files = deployed.sim.files[image]
        assert "root/trainkit_core/training/job.py" in files
        assert not [f for f in files if f.startswith("root/trainkit_api/")]


def test_ping_runs_in_the_light_image(deployed: Deployed) -> None:
    result = deployed.provider.spawn("ping", echo="sim").wait(timeout=300)
    assert result["ok"] and result["provider"] == "modal" and result["echo"] == "sim", deployed.logs()
    assert all(v["exists"] for v in result["volumes"].values())


def test_the_web_container_serves_the_dashboard(deployed: Deployed) -> None:
    with deployed.client() as client:
        page = client.get("/")
        script = client.get("/static/app.js")
    assert page.status_code == 200 and "<html" in page.text.lower(), (page.status_code, page.text[:500])
    assert script.status_code == 200 and len(script.content) > 100, (script.status_code, script.text[:300])


def test_a_fine_tuning_file_uploads_through_the_web_container(deployed: Deployed) -> None:
    """OpenAI's `files` route in the web image: its multipart parser is there, the file lands on the Volume."""
    data = b"\n".join((REPO / "datasets" / "demo" / "train.jsonl").read_bytes().splitlines()[:8]) + b"\n"
    with deployed.client() as client:
        uploaded = client.post("/v1/files", files={"file": ("sim.jsonl", data)}, data={"purpose": "fine-tune"})
        assert uploaded.status_code == 200, (uploaded.text, deployed.logs())
        file_id = uploaded.json()["id"]
        assert client.get(f"/v1/files/{file_id}/content").content == data
        bad = client.post("/v1/files", files={"file": ("bad.jsonl", b"{oops\n")}, data={"purpose": "fine-tune"})
    assert bad.status_code == 400 and "bad.jsonl:1:" in bad.json()["error"]["message"], bad.text
    assert deployed.provider.volume("data").exists(f"datasets/{file_id}/current.json")


def test_an_openai_fine_tuning_job_runs_in_the_train_image_and_its_model_answers(deployed: Deployed) -> None:
    """OpenAI's flow on the deployed app: upload, a job (a run in the train image), `ft:` chat from the inference class."""
    data = b"\n".join((REPO / "datasets" / "demo" / "train.jsonl").read_bytes().splitlines()[100:112]) + b"\n"
    with deployed.client(timeout=300) as client:
        uploaded = client.post("/v1/files", files={"file": ("ft.jsonl", data)}, data={"purpose": "fine-tune"})
        assert uploaded.status_code == 200, (uploaded.text, deployed.logs())
        body = {
            "model": "tiny",
            "training_file": uploaded.json()["id"],
            "suffix": "sim",
            "method": {"type": "supervised", "supervised": {"hyperparameters": {"n_epochs": 1, "batch_size": 4}}},
        }
        job = client.post("/v1/fine_tuning/jobs", json=body)
        assert job.status_code == 200, (job.text, deployed.logs())
        job_id, deadline = job.json()["id"], time.monotonic() + 900
        while (state := client.get(f"/v1/fine_tuning/jobs/{job_id}").json())["status"] not in ENDED:
            assert time.monotonic() < deadline, f"job still {state['status']}\n{deployed.logs()}"
            time.sleep(2)
        assert state["status"] == "succeeded", (state, deployed.logs())
        assert state["fine_tuned_model"] == f"ft:tiny:sim:{job_id}"
        events = client.get(f"/v1/fine_tuning/jobs/{job_id}/events", params={"limit": 100}).json()["data"]
        assert any(e["type"] == "metrics" for e in events), events
        chat = {"model": state["fine_tuned_model"], "messages": [{"role": "user", "content": "Opposites: hot"}]}
        answer = client.post("/v1/chat/completions", json={**chat, "max_tokens": 6})
    assert answer.status_code == 200, (answer.text, deployed.logs())
    assert answer.json()["model"] == state["fine_tuned_model"] and answer.json()["choices"][0]["message"]["content"]


def test_the_deployed_api_has_the_local_settings_and_the_versions(deployed: Deployed) -> None:
    """In a container with no trainkit distribution: versions from `__version__`, the body limit kept."""
    import trainkit_api
    import trainkit_core
    import trainkit_modal

    with deployed.client() as client:
        info = client.get("/v1/info")
        too_big = client.post(
            "/v1/runs", content=b"{" + b" " * MAX_BODY + b"}", headers={"content-type": "application/json"}
        )
        fits = client.post(
            "/v1/runs", content=b"{" + b" " * (MAX_BODY // 2) + b"}", headers={"content-type": "application/json"}
        )
    assert info.status_code == 200, info.text
    assert info.json()["versions"] == {
        "trainkit-core": trainkit_core.__version__,
        "trainkit-api": trainkit_api.__version__,
        "trainkit-modal": trainkit_modal.__version__,  # the web image has no trainkit_cli source
    }
    assert too_big.status_code == 413, (too_big.status_code, too_big.text[:300])
    assert fits.status_code == 422, (fits.status_code, fits.text[:300])  # read, then refused as no job


@pytest.fixture(scope="module")
def trained(deployed: Deployed) -> dict[str, Any]:
    """`POST /v1/runs`: a tiny run, started by the web container, trained in the train image."""
    with deployed.client() as client:
        created = client.post("/v1/runs", json={"dataset": "simdemo", "model_size": "tiny", "steps": STEPS})
        assert created.status_code == 201, f"{created.status_code} {created.text}\n{deployed.logs()}"
        run_id = created.json()["id"]
        deadline = time.monotonic() + 900
        while True:
            record = client.get(f"/v1/runs/{run_id}").json()
            if record["status"] in ("succeeded", "failed", "stopped", "cancelled"):
                break
            assert time.monotonic() < deadline, f"run still {record['status']}\n{deployed.logs()}"
            time.sleep(2)
    return record  # type: ignore[no-any-return]


def test_a_job_started_from_the_web_endpoint_succeeds(trained: dict[str, Any], deployed: Deployed) -> None:
    assert trained["status"] == "succeeded", f"{trained}\n{deployed.logs()}"
    assert trained["step"] == STEPS
    # The seed's step_times, through the fake Modal: every phase with its start and its end.
    from trainkit_core.runs.training_run import PHASES

    times = trained["step_times"]
    assert list(times) == list(PHASES), times
    assert all(None not in (t["start"], t["end"]) and t["start"] <= t["end"] for t in times.values()), times
    assert deployed.provider.volume("models").exists(f"trained/{trained['id']}/adapter_model.safetensors")


def _generate(client: Any, request: dict[str, Any], deployed: Deployed) -> tuple[list[int], Any]:
    """What trainkit's clients do with the deployed API: follow a 202 to its `Location` until the answer."""
    answer = client.post("/v1/generate", json=request)
    statuses = [answer.status_code]
    deadline = time.monotonic() + 300
    while answer.status_code == 202:
        assert time.monotonic() < deadline, f"generation still pending\n{deployed.logs()}"
        assert (
            answer.json()["status"] == "pending" and answer.headers["location"] == f"/v1/generate/{answer.json()['id']}"
        )
        time.sleep(0.5)
        answer = client.get(answer.headers["location"])
        statuses.append(answer.status_code)
    assert answer.status_code == 200, f"{answer.status_code} {answer.text}\n{deployed.logs()}"
    return statuses, answer.json()


def test_generate_from_the_inference_class(trained: dict[str, Any], deployed: Deployed) -> None:
    """A cold inference container loads its model for longer than the web limit: 202, then the answer."""
    request = {"model_path": f"trained/{trained['id']}", "prompt": "quiet river", "max_new_tokens": 8}
    with deployed.client(timeout=300) as client:
        started = time.monotonic()
        statuses, result = _generate(client, request, deployed)
        first_wait = time.monotonic() - started
        again, second = _generate(client, request, deployed)  # a warm container: the same answer
    assert statuses[0] == 202 and statuses[-1] == 200 and len(statuses) >= 2, statuses
    assert first_wait > ANSWER_WITHIN_S
    assert isinstance(result["text"], str) and result["usage"]["completion_tokens"] >= 1
    assert second["text"] == result["text"] and again[-1] == 200


def test_a_stream_starts_before_the_model_is_loaded(trained: dict[str, Any], deployed: Deployed) -> None:
    request = {"model_path": f"trained/{trained['id']}", "prompt": "quiet river", "max_new_tokens": 4, "stream": True}
    with deployed.client(timeout=300) as client, client.stream("POST", "/v1/generate", json=request) as answer:
        assert answer.status_code == 200
        text = "".join(answer.iter_text())
    assert text.startswith(": started") and "event: done" in text, text[:500]


def test_a_chat_completion_is_kept_alive_past_the_model_load(trained: dict[str, Any], deployed: Deployed) -> None:
    """Non-streamed and OpenAI-compatible: 200 and JSON within the limit, spaces while the model loads, the answer."""
    request = {"model": f"trained/{trained['id']}", "messages": [{"role": "user", "content": "quiet river"}]}
    with deployed.client(timeout=300) as client:
        started = time.monotonic()
        with client.stream("POST", "/v1/chat/completions", json={**request, "max_tokens": 8}) as answer:
            started_within = time.monotonic() - started
            body = answer.read().decode()
        waited = time.monotonic() - started
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json", body[:500]
    assert started_within < ANSWER_WITHIN_S + 2.0 < waited, (started_within, waited)
    assert body.startswith(" ") and body.lstrip().startswith("{"), f"{body[:200]!r}\n{deployed.logs()}"
    completion = json.loads(body)
    assert completion["object"] == "chat.completion", f"{body[:500]}\n{deployed.logs()}"
    assert completion["choices"][0]["message"]["content"] and completion["usage"]["completion_tokens"] >= 1


def test_a_generation_result_is_not_any_calls_result(deployed: Deployed) -> None:
    """`GET /v1/generate/{id}` serves generations only, not another job's result."""
    handle = deployed.provider.spawn("ping", echo="private")
    handle.wait(timeout=300)
    with deployed.client() as client:
        answer = client.get(f"/v1/generate/{handle.call_id}")
    assert answer.status_code == 404, answer.text


def test_an_eval_runs(trained: dict[str, Any], deployed: Deployed) -> None:
    body = {"model_path": f"trained/{trained['id']}", "max_examples": 2, "max_new_tokens": 8, "compare_base": False}
    with deployed.client() as client:
        started = client.post("/v1/evals/run", json=body)
        assert started.status_code == 202, f"{started.status_code} {started.text}\n{deployed.logs()}"
        report_id = started.json()["report_id"]
        deadline = time.monotonic() + 600
        while True:
            report = client.get(f"/v1/evals/{report_id}")
            if report.status_code == 200 and report.json()["status"] in ("done", "failed"):
                break
            assert time.monotonic() < deadline, f"eval still running\n{deployed.logs()}"
            time.sleep(2)
    assert report.json()["status"] == "done", f"{report.text}\n{deployed.logs()}"


def test_an_export_runs_as_a_job_and_writes_to_the_models_volume(
    trained: dict[str, Any], deployed: Deployed, tmp_path: Path
) -> None:
    """`POST /v1/exports`: the merge runs in the infer image's container, with a GGUF checked there in llama.cpp
    (the image's xllamacpp); then it downloads like any model."""
    from trainkit_core.export.merged import download

    with deployed.client() as client:
        started = client.post("/v1/exports", json={"model_path": f"trained/{trained['id']}", "gguf": "q8_0"})
        assert started.status_code == 202, f"{started.status_code} {started.text}\n{deployed.logs()}"
        name = started.json()["export_path"].split("/", 1)[1]
        deadline = time.monotonic() + 600
        while True:
            export = client.get(f"/v1/exports/{name}")
            if export.status_code == 200 and export.json()["status"] in ("done", "failed"):
                break
            assert time.monotonic() < deadline, f"export still running\n{deployed.logs()}"
            time.sleep(2)
    assert export.json()["status"] == "done", f"{export.text}\n{deployed.logs()}"
    assert export.json()["architectures"] == ["Gemma3ForCausalLM"]
    written = download(deployed.provider.volume("models"), f"exports/{name}", tmp_path / "merged")
    assert written > 0 and (tmp_path / "merged" / "model.safetensors").is_file()
    check = export.json()["gguf"]["check"]  # q8_0: its exact-match rate is reported, not required
    assert check["prompts"] == 4 and check["prompt_tokens_equal"] and check["chat_template_equal"], check
    assert (tmp_path / "merged" / "model-q8_0.gguf").is_file() and (tmp_path / "merged" / "Modelfile").is_file()


def _run_through_the_web(deployed: Deployed, body: dict[str, Any]) -> dict[str, Any]:
    with deployed.client() as client:
        created = client.post("/v1/runs", json=body)
        assert created.status_code == 201, f"{created.status_code} {created.text}\n{deployed.logs()}"
        run_id, deadline = created.json()["id"], time.monotonic() + 900
        while (record := client.get(f"/v1/runs/{run_id}").json())["status"] not in ENDED:
            assert time.monotonic() < deadline, f"run still {record['status']}\n{deployed.logs()}"
            time.sleep(2)
    return record  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "scale",
    [{"gpus": 2}, {"nodes": 2}, {"gpus": 2, "strategy": "fsdp"}],
    ids=["two-gpus", "two-nodes", "two-gpus-sharded"],
)
def test_a_run_on_two_ranks_trains_in_the_train_image(deployed: Deployed, scale: dict[str, int]) -> None:
    """torchrun's ranks in the train image's container (2 GPUs), or one per container of a 2-node cluster.

    The ranks are new processes of the container: they rebuild Modal's job context with the
    modal SDK the image holds, and (2 nodes) meet at the address Modal gives node 0.
    """
    body = {"dataset": "simdemo", "model_size": "tiny", "gpu": "T4", "steps": STEPS, "batch_size": 1, **scale}
    record = _run_through_the_web(deployed, body)
    assert record["status"] == "succeeded", f"{record}\n{deployed.logs()}"
    assert record["step"] == STEPS
    from trainkit_core.runs.training_run import RunStore

    run = RunStore.for_provider(deployed.provider).get(record["id"])
    call = json.loads((deployed.root / "calls" / f"{run.call_id}.json").read_text())
    nodes = scale.get("nodes", 1)
    assert (call["name"] == "train_nodes2") == (nodes == 2), call["name"]
    assert call["options"]["gpu"] == ("T4" if nodes == 2 else "T4:2") and call["policy"].get("cluster_size", 1) == nodes
    events = run.events.read()
    said = [e for e in events if "processes" in e]
    assert [(e["processes"], e["strategy"]) for e in said] == [(2, scale.get("strategy", "ddp"))], said
    assert deployed.provider.volume("models").exists(f"trained/{record['id']}/adapter_model.safetensors")
