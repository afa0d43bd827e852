"""Inside a container of the app, jobs go to that container's own app (`trainkit_modal.own_app`).

`trainkit serve --provider modal` runs the app ephemerally: its web API must start jobs
in that ephemeral app, not in a deployed app of the same name (modal's `from_name` finds
deployed apps only; the fake is as strict). The fake tests route through the provider
as the web container's API does; the last tests run the hydration on the real modal
SDK's objects, offline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType

import pytest

from trainkit_core.errors import NotFoundError
from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings
from trainkit_modal.plugin import ModalPlugin


def provider_on(sdk: object) -> Provider:
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: sdk), name="modal", module="trainkit_modal.plugin")
    return get_provider("modal", Settings.from_env(), pm=pm)


def _call_record(fake_modal: ModuleType, call_id: str) -> dict:
    return json.loads((fake_modal._root() / "calls" / f"{call_id}.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture
def container(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The fake SDK; the test may make this process a container (`fake_modal.enter_container`); undone after."""
    monkeypatch.setattr(fake_modal.App, "_container_app", None)
    yield fake_modal


def _start_job_and_infer(provider: Provider, fake_modal: ModuleType) -> list[dict]:
    """A ping and an infer call on its own GPU (a class `with_options`), as the web API starts them."""
    provider.kv("runs").put("run-t", {"config": {"model_size": "tiny", "gpu": ""}})
    ping = provider.spawn("ping")
    infer = provider.spawn("infer", model_path="trained/run-t", prompt="hi", model_size="tiny", gpu="H100")
    try:
        assert ping.wait(timeout=120)["provider"] == "modal"
        records = [_call_record(fake_modal, handle.call_id) for handle in (ping, infer)]
        assert records[1]["name"] == "Inference_tiny" and records[1]["options"] == {"gpu": "H100"}
        for handle, record in zip((ping, infer), records, strict=True):
            assert handle.app["provider_app_id"] == record["app_id"]  # type: ignore[attr-defined]
        return records
    finally:
        infer.cancel()


@pytest.mark.slow
def test_an_ephemeral_apps_web_container_starts_jobs_in_that_app(container: ModuleType) -> None:
    provider = provider_on(container)
    deployed = provider.deployment().deploy().detail["app_id"]
    built = provider.deployment().build()  # type: ignore[attr-defined]
    with built.app.run():
        dev = built.app.app_id
        assert dev != deployed
        container.enter_container(dev)
        records = _start_job_and_infer(provider, container)
    assert [r["app_id"] for r in records] == [dev, dev]


@pytest.mark.slow
def test_an_ephemeral_app_works_with_no_deployed_app(container: ModuleType) -> None:
    provider = provider_on(container)
    built = provider.deployment().build()  # type: ignore[attr-defined]
    with built.app.run():
        with pytest.raises(NotFoundError, match="not deployed"):
            provider.spawn("ping")  # outside a container: by name, and Modal finds no ephemeral app by name
        container.enter_container(built.app.app_id)
        records = _start_job_and_infer(provider, container)
    assert {r["app_id"] for r in records} == {built.app.app_id}


@pytest.mark.slow
def test_a_deployed_apps_web_container_starts_jobs_in_its_own_app(container: ModuleType) -> None:
    provider = provider_on(container)
    deployed = provider.deployment().deploy().detail["app_id"]
    container.enter_container(deployed)
    records = _start_job_and_infer(provider, container)
    assert [r["app_id"] for r in records] == [deployed, deployed]
    handle = provider.spawn("ping")
    assert handle.app["deployment_id"] == f"{deployed}/v1"  # type: ignore[attr-defined]
    handle.wait(timeout=120)


# --------------------------------------------------------------------------- the real modal SDK, offline


@pytest.fixture
def real_container() -> Iterator[ModuleType]:
    """Real modal 1.6.4 objects in the state its container entrypoint leaves: `_App._init_container(layout)`."""
    import modal
    from modal.app import _App
    from modal.running_app import RunningApp
    from modal_proto import api_pb2

    layout = RunningApp(
        "ap-dev123",
        function_ids={"ping": "fu-ping1", "Inference_4b.*": "fu-infer1", "web": "fu-web1"},
        class_ids={"Inference_4b": "cs-infer1"},
        object_handle_metadata={
            "fu-ping1": api_pb2.FunctionHandleMetadata(function_name="ping"),
            "fu-infer1": api_pb2.FunctionHandleMetadata(
                function_name="Inference_4b.*",
                method_handle_metadata={"run": api_pb2.FunctionHandleMetadata(function_name="Inference_4b.run")},
            ),
            "fu-web1": api_pb2.FunctionHandleMetadata(function_name="web"),
            "cs-infer1": api_pb2.ClassHandleMetadata(),
        },
    )
    _App()._init_container(None, layout)  # a serialized function's app: a fresh `_App()`, as modal makes it
    try:
        yield modal
    finally:
        _App._reset_container_app()


def test_real_modal_handles_are_hydrated_from_the_containers_layout(real_container: ModuleType) -> None:
    from trainkit_modal import own_app

    modal = real_container
    fn = own_app.lookup(modal, "function", "trainkit", "ping")
    assert fn.object_id == "fu-ping1"  # hydrated: no lookup by name when it is used
    assert fn.with_options(gpu="H100") is not None
    cls = own_app.lookup(modal, "class", "trainkit", "Inference_4b")
    assert cls.object_id == "cs-infer1"
    instance = cls.with_options(gpu="H100")()
    assert instance.run is not None
    assert own_app.container_app_id(modal) == "ap-dev123"
    with pytest.raises(NotFoundError, match="declares no function 'train_12b'"):
        own_app.lookup(modal, "function", "trainkit", "train_12b")


def test_real_modal_outside_a_container_looks_up_by_name() -> None:
    import modal

    from trainkit_modal import own_app

    assert own_app.container_app_id(modal) is None
    fn = own_app.lookup(modal, "function", "trainkit", "ping")
    cls = own_app.lookup(modal, "class", "trainkit", "Inference_4b")
    with pytest.raises(AttributeError, match="unhydrated"):
        fn.object_id  # noqa: B018 - hydrated only when used, by name
    assert "from_name('trainkit', 'ping')" in repr(fn)
    assert "from_name('trainkit', 'Inference_4b')" in repr(cls)
