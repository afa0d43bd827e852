"""Seed 000's command line, for users who live in the `modal` CLI.

``modal run -m trainkit_modal.entrypoint --action ping|datasets|sync|validate|train|infer``
with ``--dataset``, ``--train-steps``, ``--model-size``, ``--model-path`` and ``--prompt``,
as the seed's ``modal run app.py`` took them. Each action is what the `trainkit`
command does for it (`ping`, `datasets`, `sync`, `validate`, `train`, `infer`), on the
Modal provider, through trainkit_core: this module never imports the CLI. `train`
syncs the local dataset first and waits for the run to end, since the app that
`modal run` starts stops when the entry point returns.

`trainkit_modal.entrypoint` declares ``main``, the app's local entry point, over
`run_entrypoint`.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any, Literal, get_args

from trainkit_core.errors import JobError, TrainkitError, UsageError

if TYPE_CHECKING:
    from trainkit_core.plugins.provider import Provider
    from trainkit_modal.app import BuiltApp

#: Seed 000's actions; as a `Literal`, Modal's CLI offers them as the choices of ``--action``.
Action = Literal["ping", "datasets", "sync", "validate", "train", "infer"]
ACTIONS: tuple[str, ...] = get_args(Action)
#: The actions that work on one dataset: the seed has no default dataset.
NEEDS_DATASET = ("sync", "validate", "train")
#: How long `ping` and `infer` wait for their job, in seconds.
CALL_TIMEOUT_S = 1800.0


def _say(text: str) -> None:
    print(text, flush=True)


def run_action(
    provider: Provider,
    action: str,
    *,
    dataset: str = "",
    train_steps: int = 0,
    model_size: str = "",
    model_path: str = "",
    prompt: str = "",
    poll_s: float = 1.0,
) -> Any:
    """Do one of seed 000's actions on `provider`; returns what it printed, as data."""
    if action not in ACTIONS:
        raise UsageError(f"--action {action!r} is not one of {', '.join(ACTIONS)}")
    if action in NEEDS_DATASET and not dataset:
        raise UsageError(
            f"--action {action} needs --dataset NAME (there is no default dataset)",
            hint="--action datasets lists the local datasets",
        )
    if action == "ping":
        # With --model-size, seed 000's ping: the job in that size's image and on its GPU
        # (image, volumes, CUDA device, whether HF_TOKEN is set), as `trainkit ping --model-size`.
        job, kwargs = ("gpu_ping", {"model_size": model_size}) if model_size else ("ping", {})
        result = provider.spawn(job, **kwargs).wait(timeout=CALL_TIMEOUT_S)
        _say(json.dumps(result, indent=2, default=str))
        return result
    if action == "datasets":
        from trainkit_core.datasets.local import list_local

        names = [d.name for d in list_local(provider.settings.datasets.datasets_dir)]
        _say("\n".join(names) if names else f"no datasets in {provider.settings.datasets.datasets_dir}")
        return names
    if action == "sync":
        from trainkit_core.datasets.sync import sync_dataset

        synced = sync_dataset(provider, dataset)
        _say(f"{dataset}: {'unchanged' if synced.unchanged else 'uploaded'} (version {synced.version})")
        return synced.as_dict()
    if action == "validate":
        from trainkit_core.datasets.validate import DatasetInvalidError, validate_synced

        report = validate_synced(provider.volume("data"), dataset)
        if not report.ok():
            raise DatasetInvalidError(report)
        _say(report.summary())
        return report.as_dict()
    if action == "train":
        return _train(provider, dataset, train_steps, model_size, poll_s)
    return _infer(provider, model_size, model_path, prompt)


def _train(provider: Provider, dataset: str, train_steps: int, model_size: str, poll_s: float) -> dict[str, Any]:
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.submit import start_run

    values: dict[str, Any] = {"dataset": dataset}
    if train_steps:
        values["steps"] = train_steps
    if model_size:
        values["model_size"] = model_size
    run = start_run(provider, TrainConfig.parse(values))
    _say(f"started run {run.id} on {provider.name} (dataset {run.dataset_id})")
    _wait_through_outages(run, poll_s)
    _say(f"run {run.id} {run.status} at step {run.step}: {json.dumps(run.metrics, default=str)}")
    if run.status == "failed":
        raise JobError(f"run {run.id} failed: {run.error_message or 'no error text'}")
    return run.model_dump(mode="json")


def _wait_through_outages(run: Any, poll_s: float) -> None:
    """`run.wait`, asking again while Modal's service fails (`errors.ModalUnavailable`).

    The app `modal run` started stops when the entry point returns, and with it the run's
    container: a passing failure of Modal's must not end the wait (nor the run).
    """
    from trainkit_modal.errors import ModalUnavailable

    pause = max(poll_s, 0.5)
    while True:
        try:
            run.wait(poll_s=poll_s)
            return
        except ModalUnavailable as exc:
            _say(f"run {run.id}: no answer from Modal ({exc.message}); still waiting")
            time.sleep(pause)
            pause = min(pause * 2, 30.0)


def _infer(provider: Provider, model_size: str, model_path: str, prompt: str) -> dict[str, Any]:
    import trainkit_core.inference.client as client

    if not prompt:
        raise UsageError("--action infer needs --prompt TEXT")
    request = {"prompt": prompt, "model_path": model_path or None, "model_size": model_size or None}
    result = client.generate(provider, request, timeout=CALL_TIMEOUT_S)
    _say(result["text"])
    return result


def run_entrypoint(built: BuiltApp, provider: Provider, action: str, **flags: Any) -> Any:
    """`run_action` as the entry point runs it: in the app `modal run` started, errors as messages.

    While it runs, the app's functions and classes are those of `built`, hydrated by
    ``modal run`` (`own_app.running_here`). A trainkit error is printed with its hint
    and exits with its status, as the `trainkit` command does.
    """
    from trainkit_modal import own_app

    try:
        with own_app.running_here(built.spec.app_name, str(built.app.app_id or ""), built.objects):
            return run_action(provider, action, **flags)
    except TrainkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
