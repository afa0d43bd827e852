"""Seed 000's `modal run app.py --action ...`: `trainkit_modal.entrypoint`, offline.

The module Modal's CLI imports is checked on the real SDK: one app, the same as
`trainkit app deploy` builds, with one local entry point whose parameters are the
seed's flags. Each action then runs through the app object on the fake SDK, inside
`App.run()` as `modal run` does: its jobs go to that running app, never to a deployed
one (nothing is deployed here). `train` and `infer` train and generate for real on
the tiny model (marked `ml`).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import get_provider
from trainkit_core.settings import Settings
from trainkit_modal.actions import ACTIONS
from trainkit_modal.app import BuiltApp, build_app
from trainkit_modal.plugin import ModalPlugin

SEED_FLAGS = ["action", "dataset", "train_steps", "model_size", "model_path", "prompt"]


def _dataset(root: Path) -> Path:
    """`mini`: 16 short conversations, no eval split (trains in seconds on the tiny model, no eval after)."""
    folder = root / "mini"
    folder.mkdir(parents=True)
    words = ["snow", "blue", "river", "quiet", "stone", "light", "green", "north"]

    def line(a: str, b: str) -> str:
        return json.dumps({"messages": [{"role": "user", "content": f"Uppercase: {a} {b}"}, {"role": "assistant", "content": f"{a} {b}".upper()}]}) + "\n"  # fmt: skip

    (folder / "train.jsonl").write_text("".join(line(a, b) for a in words for b in words[:2]))
    (folder / "dataset.toml").write_text('name = "mini"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    return root


def modal_run(*argv: str) -> None:
    """``modal run -m trainkit_modal.entrypoint ARGV``: Modal's own CLI parses the flags, then the entry point runs."""
    from modal.cli.run import _get_click_command_for_local_entrypoint

    import trainkit_modal.entrypoint as entrypoint

    command = _get_click_command_for_local_entrypoint(entrypoint.app, entrypoint.main)
    with command.make_context("modal run", list(argv)) as ctx:
        params = dict(ctx.params)
    entrypoint.main(**params)


@pytest.fixture
def seed_cli(fake_modal: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BuiltApp]:
    """The entry point over the app built on the fake SDK, running (as under `modal run`), and a local dataset."""
    import trainkit_modal.entrypoint as entrypoint

    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(_dataset(tmp_path / "datasets")))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    settings = Settings.from_env()
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: fake_modal), name="modal", module="trainkit_modal.plugin")
    built = build_app(settings, sdk=fake_modal)
    monkeypatch.setattr(entrypoint, "built", built)
    monkeypatch.setattr(entrypoint, "provider", lambda: get_provider("modal", settings, pm=pm))
    with built.app.run():
        yield built


def _calls(fake_modal: ModuleType) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted((fake_modal._root() / "calls").glob("fc-*.json"))]
    return [c for c in found if "name" in c]  # the call records, not their results


# --------------------------------------------------------------------------- the module Modal's CLI imports


def test_the_module_holds_the_app_trainkit_deploys_and_one_entry_point_with_the_seeds_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import modal

    import trainkit_modal.entrypoint as entrypoint
    from trainkit_modal.deploy import ModalDeployment

    assert isinstance(entrypoint.app, modal.App) and entrypoint.app.name == "trainkit"
    raw = entrypoint.main.info.raw_f
    parameters = inspect.signature(raw).parameters
    assert list(parameters) == SEED_FLAGS  # `modal run` spells them --action, --train-steps, ...
    hints = typing.get_type_hints(raw)
    assert typing.get_args(hints.pop("action")) == ACTIONS
    assert hints == {"train_steps": int, "return": type(None), **{n: str for n in SEED_FLAGS[1:] if n != "train_steps"}}
    assert parameters["action"].default == "ping"  # `modal run app.py` alone pings

    # The same app as `trainkit app deploy` builds from the same settings (the environment's,
    # read when Modal's CLI imports the module): functions, images, GPUs, volumes, secrets.
    deployed = ModalDeployment(lambda: modal, entrypoint.settings).build()
    assert entrypoint.built.spec == deployed.spec
    assert set(entrypoint.built.objects) == set(deployed.objects)
    for name, obj in entrypoint.built.objects.items():
        mine, theirs = _info(obj), _info(deployed.objects[name])
        assert (mine.gpus, mine.timeout, sorted(mine.volumes), mine.secrets, mine.max_retries) == (
            theirs.gpus,
            theirs.timeout,
            sorted(theirs.volumes),
            theirs.secrets,
            theirs.max_retries,
        ), name


def _info(obj: Any) -> Any:
    service = getattr(obj, "_get_class_service_function", None)
    return (service() if service else obj).info()


def test_modals_cli_reads_the_seeds_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `modal run` would pass the entry point, parsed by Modal's own command builder, offline."""
    from modal.cli.run import _get_click_command_for_local_entrypoint

    import trainkit_modal.entrypoint as entrypoint

    command = _get_click_command_for_local_entrypoint(entrypoint.app, entrypoint.main)
    argv = ["--action", "train", "--dataset", "mini", "--train-steps", "100", "--model-size", "4b"]
    with command.make_context("modal run", argv) as ctx:
        assert ctx.params == {
            "action": "train",
            "dataset": "mini",
            "train_steps": 100,
            "model_size": "4b",
            "model_path": "",
            "prompt": "",
        }
    import click

    with pytest.raises(click.BadParameter, match="'deploy' is not one of 'ping', 'datasets', 'sync'"):
        command.make_context("modal run", ["--action", "deploy"])
    with pytest.raises(click.BadParameter, match="'many' is not a valid integer"):
        command.make_context("modal run", ["--train-steps", "many"])


# --------------------------------------------------------------------------- each action, through the app object


def test_ping_runs_in_the_app_modal_run_started(
    seed_cli: BuiltApp, fake_modal: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    built = seed_cli
    modal_run()  # `modal run -m trainkit_modal.entrypoint`: the default action
    printed = json.loads(capsys.readouterr().out)
    assert printed["ok"] is True and printed["provider"] == "modal"
    assert [(c["name"], c["app_id"]) for c in _calls(fake_modal)] == [("ping", built.app.app_id)]


def test_datasets_sync_and_validate(
    seed_cli: BuiltApp, fake_modal: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    modal_run("--action", "datasets")
    assert capsys.readouterr().out.split() == ["mini"]
    modal_run("--action", "sync", "--dataset", "mini")
    assert capsys.readouterr().out.startswith("mini: uploaded (version ")
    modal_run("--action", "sync", "--dataset", "mini")
    assert capsys.readouterr().out.startswith("mini: unchanged (version ")
    modal_run("--action", "validate", "--dataset", "mini")
    assert "16 train / 0 eval examples" in capsys.readouterr().out
    assert _calls(fake_modal) == []  # the data volume is reached from here; no job


@pytest.mark.parametrize("action", ["sync", "validate", "train"])
def test_an_action_on_a_dataset_needs_one_and_says_so(
    seed_cli: BuiltApp, fake_modal: ModuleType, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        modal_run("--action", action)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--action {action} needs --dataset NAME (there is no default dataset)" in err
    assert "hint: --action datasets lists the local datasets" in err
    assert _calls(fake_modal) == []


def test_bad_input_is_refused_naming_it(
    seed_cli: BuiltApp, fake_modal: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        modal_run("--action", "validate", "--dataset", "nosuch")
    assert exit_info.value.code != 0
    assert "nosuch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        modal_run("--action", "infer", "--model-path", "trained/run-x")
    assert "--action infer needs --prompt TEXT" in capsys.readouterr().err
    assert _calls(fake_modal) == []


@pytest.mark.ml
def test_train_then_infer_on_the_tiny_model(
    seed_cli: BuiltApp, fake_modal: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--action train` syncs first, waits for the run; `--action infer --model-path` generates with it."""
    built = seed_cli
    modal_run("--action", "train", "--dataset", "mini", "--train-steps", "3", "--model-size", "tiny")
    out = capsys.readouterr().out
    assert "started run run-" in out and " succeeded at step 3: " in out, out
    run_id = out.split("started run ", 1)[1].split()[0]
    modal_run("--action", "infer", "--model-path", f"trained/{run_id}", "--prompt", "Uppercase: snow blue")
    assert capsys.readouterr().out.strip()  # the tiny model's answer, whatever it is after 3 steps
    calls = _calls(fake_modal)
    assert {c["app_id"] for c in calls} == {built.app.app_id}  # every job ran in the app `modal run` started
    import trainkit_modal.entrypoint as entrypoint
    from trainkit_core.runs.training_run import PHASES, RunStore

    run = RunStore.for_provider(entrypoint.provider()).get(run_id)
    assert run.modal_app_id == built.app.app_id  # the record names the app it ran in
    # The seed's step_times, from a job on the fake Modal: every phase but `evaluating` (no eval split).
    assert list(run.step_times) == [p for p in PHASES if p != "evaluating"]
    assert all(None not in (t["start"], t["end"]) for t in run.step_times.values()), run.step_times
    # Call files are named by random ids, so their order says nothing: the train call is among them.
    assert "train_tiny" in {c["name"] for c in calls}, calls
