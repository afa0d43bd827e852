"""Modal-specific behaviour of the hook objects: the errors a user meets, and the app lifecycle.

Most tests run on the fake SDK (`fake_modal.py`); the no-token tests use the real
modal SDK, offline, to show what a user without credentials sees.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from trainkit_core.errors import JobError, NotFoundError, ProviderError, UsageError
from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings
from trainkit_modal.errors import TOKEN_HINT
from trainkit_modal.kv import ModalKV, dict_name
from trainkit_modal.plugin import ModalPlugin


def provider_on(sdk: object, settings: Settings | None = None) -> Provider:
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: sdk), name="modal", module="trainkit_modal.plugin")
    return get_provider("modal", settings or Settings.from_env(), pm=pm)


# --------------------------------------------------------------------------- no token (real SDK, offline)


def test_no_token_tells_how_to_log_in() -> None:
    import modal

    kv = ModalKV.for_settings(modal, Settings.from_env(), "runs")
    with pytest.raises(ProviderError) as info:
        kv.get("anything")
    assert info.value.hint == TOKEN_HINT
    assert "modal token new" in str(info.value) and "MODAL_TOKEN_ID" in str(info.value)


def test_no_token_on_spawn_and_status_of_the_real_provider() -> None:
    provider = get_provider("modal", Settings.from_env())
    with pytest.raises(ProviderError, match="modal token new"):
        provider.spawn("ping")
    with pytest.raises(ProviderError, match="modal token new"):
        provider.deployment().status()


# --------------------------------------------------------------------------- errors


def test_app_not_deployed_says_to_deploy(fake_modal: ModuleType) -> None:
    provider = provider_on(fake_modal)
    with pytest.raises(NotFoundError) as info:
        provider.spawn("ping")
    assert "not deployed" in info.value.message
    assert "trainkit app deploy" in (info.value.hint or "")


def test_gated_model_without_hf_secret_is_refused_before_spawning(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    with pytest.raises(UsageError) as info:
        provider.spawn("train", model_size="4b", dataset="demo")
    assert "google/gemma-3-4b-it" in info.value.message and "gated" in info.value.message
    assert "TRAINKIT_HF_SECRET" in (info.value.hint or "")
    assert provider.kv("_calls").keys() == []  # nothing started, nothing recorded


def test_ungated_tiny_model_needs_no_secret(fake_modal: ModuleType) -> None:
    from trainkit_modal.function_runner import ModalRunner

    runner = ModalRunner(fake_modal, Settings.from_env())
    runner._check_secret({"model_size": "tiny"})  # no error
    runner._check_secret({"base_model": "someorg/open-model"})
    with pytest.raises(UsageError):
        runner._check_secret({"model_size": "12b"})


def test_bad_settings_fail_the_deploy_naming_the_setting(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable, value, words in (
        ("TRAINKIT_GPU", "RTX4090", "not a GPU Modal knows"),
        ("TRAINKIT_TRAIN_TIMEOUT_S", "90000", "24 h"),
        ("TRAINKIT_INFER_IDLE_TIMEOUT_S", "4000", "2 to 3600"),
    ):
        with monkeypatch.context() as m:
            m.setenv(variable, value)
            deployment = provider_on(fake_modal).deployment()
            with pytest.raises(UsageError, match=words) as info:
                deployment.deploy()
            assert variable in str(info.value)
            with pytest.raises(UsageError):
                deployment.check(["ping"])
    assert not (fake_modal._root() / "apps").exists(), "a refused deploy left an app behind"


def test_dict_names_follow_modal_rules() -> None:
    assert dict_name("trainkit", "runs") == "trainkit-kv-runs"
    with pytest.raises(UsageError, match="Modal refuses"):
        dict_name("trainkit", "has space")
    with pytest.raises(UsageError, match="Modal refuses"):
        dict_name("trainkit", "x" * 60)


def test_call_ids_are_checked(fake_modal: ModuleType) -> None:
    provider = provider_on(fake_modal)
    with pytest.raises(UsageError, match="not a Modal call id"):
        provider.call("lc-123")
    with pytest.raises(NotFoundError):
        provider.call("fc-0123456789abcdef")


# --------------------------------------------------------------------------- lifecycle


def test_deploy_status_stop(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_API_TOKEN", "test-token")
    deployment = provider_on(fake_modal).deployment()
    before = deployment.status()
    assert before.state == "not-deployed"
    assert "ping" in before.detail["declared"]

    after = deployment.deploy()
    assert after.state == "deployed"
    assert after.detail["missing"] == []
    assert {f.removesuffix(".*") for f in after.detail["functions"]} == set(after.detail["declared"])
    if "web" in after.detail["declared"]:
        assert after.url and after.url.startswith("https://")

    again = deployment.deploy()  # redeploy: same app, new version
    assert again.detail["app_id"] == after.detail["app_id"]
    assert again.detail["version"] == after.detail["version"] + 1

    deployment.stop()
    with pytest.raises(NotFoundError, match="not deployed"):
        deployment.stop()


def test_a_stopped_app_is_reported_stopped(fake_modal: ModuleType) -> None:
    """Modal's lookup by name misses a stopped app; the app id kept at deploy finds it."""
    deployment = provider_on(fake_modal).deployment()
    deployed = deployment.deploy()
    deployment.stop()
    with pytest.raises(fake_modal.exception.NotFoundError):
        fake_modal.App.lookup("trainkit")  # what Modal answers by name once the app is stopped
    stopped = deployment.status()
    assert stopped.state == "stopped" and stopped.url is None
    assert stopped.detail["app_id"] == deployed.detail["app_id"]
    assert stopped.detail["modal_state"] == "stopped"
    # Deploying again starts a new app under the name.
    again = deployment.deploy()
    assert again.state == "deployed" and again.detail["app_id"] != deployed.detail["app_id"]


def test_declared_classes_count_as_deployed(fake_modal: ModuleType) -> None:
    """`AppInfo.functions` names a class by its service function `Inference_<size>.*`."""
    status = provider_on(fake_modal).deployment().deploy()
    assert "Inference_4b.*" in status.detail["functions"] and "Inference_4b" not in status.detail["functions"]
    assert "Inference_4b" in status.detail["declared"]
    assert status.detail["missing"] == []


def test_job_runs_in_a_container_with_volumes_and_dicts(fake_modal: ModuleType) -> None:
    """A call runs the declared function in a worker that rebuilt the app (as a Modal container does)."""
    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    provider.volume("data").write_bytes("datasets/demo/dataset.toml", b'name = "demo"\n')
    handle = provider.spawn("ping", echo={"n": 1})
    result = handle.wait(timeout=60)
    assert result["provider"] == "modal" and result["call_id"] == handle.call_id
    assert result["echo"] == {"n": 1}
    assert all(v["exists"] for v in result["volumes"].values())
    status = handle.status()
    assert status.state == "succeeded" and status.started_at and status.ended_at
    # The call's records: which job, when it started and ended.
    calls = provider.kv("_calls")
    assert calls.get(f"{handle.call_id}/record")["function"] == "ping"
    assert calls.get(f"{handle.call_id}/ended")["state"] == "succeeded"
    # ping reads no volume, so the container reloads none; it commits every one after the job.
    ops = [line.split() for line in (fake_modal._root() / "volume-ops.log").read_text().splitlines()]
    mine = [(op, name) for call, op, name in ops if call == handle.call_id]
    volumes = {"trainkit-data", "trainkit-models", "trainkit-eval", "trainkit-hf-cache"}
    assert {name for op, name in mine if op == "commit"} == volumes
    assert [op for op, _ in mine] == ["commit"] * 4


def test_failed_job_error_text_survives(fake_modal: ModuleType) -> None:
    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    handle = provider.spawn("fail", message="out of memory at step 3")
    with pytest.raises(JobError, match="RuntimeError: out of memory at step 3"):
        handle.wait(timeout=60)
    logs = handle.logs()
    assert "Traceback" in logs and "out of memory at step 3" in logs
    # What a failed job wrote is committed too (a crashed run keeps its checkpoints).
    ops = (fake_modal._root() / "volume-ops.log").read_text()
    assert f"{handle.call_id} commit trainkit-models" in ops


def test_web_app_in_the_container_needs_no_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """The container has sources, not installed distributions: the provider is registered by hand."""
    pytest.importorskip("trainkit_api")
    from fastapi.testclient import TestClient

    from trainkit_modal.web import web_app

    monkeypatch.setenv("TRAINKIT_PROVIDER", "modal")
    monkeypatch.setenv("TRAINKIT_LOAD_PLUGINS", "")  # discovery finds nothing, as in the container
    monkeypatch.setenv("TRAINKIT_API_TOKEN", "s3cret-token")
    with TestClient(web_app()) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/v1/runs/run-x/events").status_code == 401  # the token is required


# --------------------------------------------------------------------------- routing by model size


def _call_record(fake_modal: ModuleType, call_id: str) -> dict:
    import json

    return json.loads((fake_modal._root() / "calls" / f"{call_id}.json").read_text())


@pytest.mark.parametrize(
    ("config", "function", "gpu_option"),
    [
        ({"model_size": "12b", "gpu": "A100"}, "train_12b", None),
        ({"model_size": "tiny", "gpu": ""}, "train_tiny", None),
        ({"model_size": "4b", "gpu": "h100"}, "train_4b", "H100"),  # the run's own GPU
        ({"base_model": "someorg/open-model", "gpu": "A10G"}, "train_4b", None),
    ],
)
def test_train_call_runs_on_its_runs_size_and_gpu(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, config: dict, function: str, gpu_option: str | None
) -> None:
    """The train job gets only a run id: the runner reads the run's config to pick the function."""
    monkeypatch.setenv("TRAINKIT_HF_SECRET", "huggingface")
    fake_modal.create_secret("huggingface", ["HF_TOKEN"])
    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    provider.kv("runs").put("run-20261130-120000-abcdef", {"id": "run-20261130-120000-abcdef", "config": config})
    handle = provider.spawn("train", run_id="run-20261130-120000-abcdef", resume=False)
    try:
        record = _call_record(fake_modal, handle.call_id)
        assert record["name"] == function
        assert record["options"].get("gpu") == gpu_option
        assert record["kwargs"] == {"run_id": "run-20261130-120000-abcdef", "resume": False}
    finally:
        handle.cancel()


def test_train_call_for_an_unknown_run_is_refused(fake_modal: ModuleType) -> None:
    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    with pytest.raises(NotFoundError, match="no run 'run-x'"):
        provider.spawn("train", run_id="run-x")


def test_gated_run_without_secret_is_refused(fake_modal: ModuleType) -> None:
    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    provider.kv("runs").put("run-g", {"config": {"model_size": "31b", "gpu": "A100-80GB"}})
    with pytest.raises(UsageError, match="gated"):
        provider.spawn("train", run_id="run-g")


def test_infer_goes_to_the_warm_class_of_the_trained_models_size(fake_modal: ModuleType) -> None:
    if "infer" not in __import__("trainkit_core.plugins.jobs", fromlist=["JOBS"]).JOBS:
        pytest.skip("no infer job yet")
    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    provider.kv("runs").put("run-t", {"config": {"model_size": "tiny", "gpu": ""}})
    handle = provider.spawn("infer", model_path="trained/run-t", prompt="hi")
    try:
        record = _call_record(fake_modal, handle.call_id)
        assert record["name"] == "Inference_tiny"
        assert record["args"] == [{"model_path": "trained/run-t", "prompt": "hi"}]
        assert record["kwargs"] == {"__method__": "run"}
    finally:
        handle.cancel()


# --------------------------------------------------------------------------- warm inference


@pytest.mark.slow
def test_inference_server_validates_the_model_path_in_the_container(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """generate/stream reach the warm class of the model's size; its container refuses a bad path."""
    monkeypatch.setenv("TRAINKIT_HF_SECRET", "huggingface")
    fake_modal.create_secret("huggingface", ["HF_TOKEN"])
    provider = provider_on(fake_modal)
    server = provider.inference_server()
    assert server is not None
    with pytest.raises(NotFoundError, match="trainkit app deploy"):
        server.generate({"model_path": "trained/run-t", "prompt": "hi"})
    provider.deployment().deploy()
    with pytest.raises(UsageError):
        server.generate({"model_path": "../../etc/passwd", "prompt": "hi"})
    with pytest.raises(UsageError):
        list(server.stream({"model_path": "trained/../secrets", "prompt": "hi"}))
    with pytest.raises(NotFoundError):
        server.generate({"model_path": "trained/run-20261130-120000-abcdef", "prompt": "hi"})


@pytest.mark.parametrize("keys", [None, ["OTHER_TOKEN"]])
def test_missing_hf_secret_fails_the_deploy_with_how_to_create_it(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, keys: list[str] | None
) -> None:
    monkeypatch.setenv("TRAINKIT_HF_SECRET", "hf-gemma")
    if keys is not None:
        fake_modal.create_secret("hf-gemma", keys)
    deployment = provider_on(fake_modal).deployment()
    with pytest.raises(NotFoundError) as info:
        deployment.deploy()
    assert "'hf-gemma' (TRAINKIT_HF_SECRET)" in info.value.message
    assert "modal secret create hf-gemma HF_TOKEN=" in (info.value.hint or "")
    assert deployment.status().state == "not-deployed"


def test_infer_for_an_expired_run_record_reads_the_models_card(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dict entries expire after 7 idle days; the model's card on the models volume still gives its size."""
    import json

    from trainkit_core.models.trained.paths import CARD_FILE
    from trainkit_modal.function_runner import ModalRunner

    monkeypatch.setenv("TRAINKIT_HF_SECRET", "huggingface")
    provider = provider_on(fake_modal)
    card = {
        "run_id": "run-20261101-120000-abc123",
        "base_model": "google/gemma-3-12b-it",
        "preset": "12b",
        "chat_format": "gemma3",
    }
    provider.volume("models").write_bytes(f"trained/run-20261101-120000-abc123/{CARD_FILE}", json.dumps(card).encode())
    runner = ModalRunner(fake_modal, provider.settings)
    config = runner.model_config("infer", {"model_path": "trained/run-20261101-120000-abc123", "model_size": None})
    assert config["model_size"] == "12b"
    target, gpu = runner.resolve("infer", {"model_path": "trained/run-20261101-120000-abc123"})
    assert (target.name, target.gpu, gpu) == ("Inference_12b", "A100", None)
    # Nothing readable: the arguments decide, and the container will say what is wrong.
    assert runner.model_config("eval", {"model_path": "trained/run-missing"}) == {"model_path": "trained/run-missing"}


@pytest.mark.slow
def test_gpu_ping_runs_in_the_sizes_training_image_on_its_gpu(fake_modal: ModuleType) -> None:
    provider = provider_on(fake_modal)
    status = provider.deployment().deploy()
    from trainkit_modal.spec import build_spec

    spec = build_spec(provider.settings)
    assert "gpu_ping_12b" in status.detail["functions"]
    fs = spec.functions["gpu_ping_12b"]
    assert (fs.image, fs.gpu, fs.uses_hf_secret) == ("train", "A100", True)
    handle = provider.spawn("gpu_ping", model_size="12b")
    result = handle.wait(timeout=120)
    assert _call_record(fake_modal, handle.call_id)["name"] == "gpu_ping_12b"
    assert result["provider"] == "modal" and result["model_size"] == "12b"
    assert result["gpu"] is None  # the fake's containers have no GPU


def test_several_processes_are_refused_on_modal_before_any_record(fake_modal: ModuleType) -> None:
    """`--processes` (CPU ranks) is for a provider that declares them; Modal trains on GPUs: refused at the start."""
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.training.submit import start_run

    provider = provider_on(fake_modal)
    provider.deployment().deploy()
    with pytest.raises(UsageError, match=r"processes=2: provider .modal. does not declare CPU processes"):
        start_run(provider, {"dataset": "demo", "model_size": "tiny", "processes": 2, "batch_size": 2, "steps": 1})
    assert RunStore.for_provider(provider).list() == []
    assert provider.kv("_calls").keys() == []
