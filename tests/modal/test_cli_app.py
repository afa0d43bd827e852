"""`trainkit app deploy|status|stop` over the modal provider (on the SDK fake), and `serve` wiring."""

from __future__ import annotations

import json
import sys
from types import ModuleType

import pytest

from trainkit_cli.main import main
from trainkit_core.plugins import manager as plugins
from trainkit_modal.plugin import ModalPlugin


@pytest.fixture
def cli_on_fake(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The installed plugins, with the modal provider's SDK swapped for the fake."""
    pm = plugins.build_plugin_manager()
    pm.unregister(name="modal")
    plugins.register(pm, ModalPlugin(lambda: fake_modal), name="modal", module="trainkit_modal.plugin")
    monkeypatch.setattr(plugins, "_manager", pm)
    return fake_modal


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_app_lifecycle_through_the_cli(cli_on_fake: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--provider", "modal", "app", "status", "--json")
    assert code == 0 and json.loads(out)["state"] == "not-deployed"

    code, out, err = run(capsys, "--provider", "modal", "app", "deploy", "--json")
    deployed = json.loads(out)
    assert code == 0 and deployed["state"] == "deployed"
    # What the images pin is printed (on stderr: --json keeps stdout for the JSON).
    from trainkit_modal.spec import load_stack

    stack = load_stack()
    assert f"python {stack.python}" in err
    assert all(pin in err for pin in (*stack.torch, *stack.train, *stack.infer)), err
    assert "ping" in deployed["detail"]["functions"] and deployed["detail"]["missing"] == []

    code, out, _ = run(capsys, "--provider", "modal", "app", "status")
    assert code == 0 and "deployed" in out and "ping" in out

    code, out, _ = run(capsys, "--provider", "modal", "app", "stop", "--json")
    stopped = json.loads(out)
    assert code == 0 and stopped["state"] == "stopped"  # found again by the app id kept at deploy
    assert stopped["detail"]["app_id"] == deployed["detail"]["app_id"]

    code, _, err = run(capsys, "--provider", "modal", "app", "stop")
    assert code == 3 and "not deployed" in err


def test_providers_without_a_lifecycle_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--provider", "local", "app", "deploy")
    assert code == 2
    assert "provider 'local' has no app" in err and "--provider modal" in err


def test_bad_setting_is_named_by_the_cli(
    cli_on_fake: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINKIT_GPU", "TPU")
    code, _, err = run(capsys, "--provider", "modal", "app", "deploy")
    assert code == 2 and "TRAINKIT_GPU='TPU'" in err


def test_serve_runs_the_dev_app_and_prints_its_url(
    cli_on_fake: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`trainkit serve --provider modal` runs the app ephemerally, prints the URL, stops on Ctrl-C."""
    pytest.importorskip("trainkit_api")
    from trainkit_modal import deploy

    monkeypatch.setenv("TRAINKIT_API_TOKEN", "test-token")

    def interrupt() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(deploy, "block_until_interrupted", interrupt)  # the wait ends as on Ctrl-C
    code, out, err = run(capsys, "--provider", "modal", "serve")
    assert code == 0, err
    assert "https://fake--trainkit-web-dev.modal.run" in out
    assert "stopping the dev app" in err


def test_serve_on_url_callback(cli_on_fake: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("trainkit_api")
    from trainkit_core import get_provider

    monkeypatch.setenv("TRAINKIT_API_TOKEN", "test-token")
    seen: list[str] = []
    url = get_provider("modal").deployment().serve(seen.append, block=False)  # type: ignore[attr-defined]
    assert seen == [url] and url and url.endswith("-dev.modal.run")


def test_no_public_web_api_without_a_token(cli_on_fake: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """A Modal web endpoint is public: without TRAINKIT_API_TOKEN the app leaves it out and says why."""
    pytest.importorskip("trainkit_api")
    code, out, _ = run(capsys, "--provider", "modal", "app", "deploy", "--json")
    deployed = json.loads(out)
    assert code == 0 and "web" not in deployed["detail"]["functions"]
    assert any("TRAINKIT_API_TOKEN" in note for note in deployed["detail"]["notes"])
    assert deployed["url"] is None
    from trainkit_core import get_provider
    from trainkit_core.errors import UsageError

    with pytest.raises(UsageError, match="TRAINKIT_API_TOKEN"):
        get_provider("modal").deployment().serve(block=False)  # type: ignore[attr-defined]


def test_runs_show_names_the_runs_app(cli_on_fake: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    from trainkit_core.settings import Settings
    from trainkit_modal.kv import ModalKV

    run_id = "run-20261201-020000-abcdef"
    record = {
        "id": run_id,
        "status": "succeeded",
        "app_name": "trainkit",
        "provider_app_id": "ap-0123456789",
        "provider_app_url": "https://modal.com/id/ap-0123456789",
        "deployment_id": "ap-0123456789/v4",
        "call_attempts": 2,
        "max_attempts": 3,
        "attempt_call_id": "fc-abc",
    }
    ModalKV.for_settings(cli_on_fake, Settings.from_env(), "runs").put(run_id, record)
    code, out, _ = run(capsys, "--provider", "modal", "runs", "show", run_id)
    assert code == 0
    text = " ".join(out.split())  # rich wraps long lines at the terminal's width
    assert "app trainkit (ap-0123456789), deployment ap-0123456789/v4, https://modal.com/id/ap-0123456789" in text
    assert "job attempts 2 of 3 allowed (call fc-abc)" in text


@pytest.mark.parametrize("provider", ["modal", "local"])
def test_serve_without_the_web_api_says_so_the_same_way_everywhere(
    provider: str, cli_on_fake: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One cause (trainkit-api not installed), one message style and one exit status, whichever provider serves."""
    monkeypatch.setenv("TRAINKIT_API_TOKEN", "test-token")
    for module in ("trainkit_api", "trainkit_api.app", "uvicorn"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: imports fail, find_spec says None
    code, out, err = run(capsys, "--provider", provider, "serve")
    assert code == 5, err
    assert err.startswith("error: the web API is not installed (") and "is missing)" in err, err
    assert "hint: pip install trainkit-api" in err
    assert "test-token" not in out + err


def test_a_stopped_app_is_still_found_after_an_idle_week(
    cli_on_fake: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """The `_app` Dict entry expires after 7 idle days; the models volume keeps the app's id."""
    code, out, _ = run(capsys, "--provider", "modal", "app", "deploy", "--json")
    deployed = json.loads(out)
    code, out, _ = run(capsys, "--provider", "modal", "app", "stop", "--json")
    assert code == 0 and json.loads(out)["state"] == "stopped"
    cli_on_fake.advance_clock(8 * 24 * 3600.0)
    code, out, _ = run(capsys, "--provider", "modal", "app", "status", "--json")
    after = json.loads(out)
    assert code == 0 and after["state"] == "stopped"
    assert after["detail"]["app_id"] == deployed["detail"]["app_id"]
