"""Job calls on Modal: `Function.from_name(app, fn).spawn(...)`, found again by `FunctionCall.from_id`.

Inside a container of the app (the web API on Modal) the functions and classes are
that container's own app's, deployed or ephemeral (`trainkit_modal.own_app`).

`ModalRunner.spawn` picks the declared function for the job (by model size for
train / eval, the warm inference class for infer), starts it and records the call in
the ``_calls`` namespace (a `modal.Dict`), so that any process can find it by id and
know which job it is. `ModalRunHandle.status` polls with ``get(timeout=0)``: Modal
raises `TimeoutError` while a call has no result; the container's own ``started`` and
``ended`` records tell pending from running and carry the job's error text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import JobError, JobTimeout, NotFoundError, UsageError
from trainkit_core.plugins.hookspecs import CallStatus
from trainkit_core.plugins.provider import call_kwargs
from trainkit_core.runs.training_run import RUNS_NAMESPACE
from trainkit_core.settings import Settings
from trainkit_modal import errors, own_app
from trainkit_modal.kv import ModalKV
from trainkit_modal.records import CALLS_NAMESPACE, cancel_key, deployment_record, ended_key, record_key, started_key
from trainkit_modal.spec import (
    AppSpec,
    FunctionSpec,
    base_model_of,
    check_gpu,
    is_gated,
    routing_spec,
    target_for,
)

if TYPE_CHECKING:
    from trainkit_core.plugins.placement import Placement

#: Longest single blocking `get` while waiting (Modal's server holds the request that long).
_WAIT_SLICE_S = 30.0
#: Pauses between polls while Modal's service fails (`errors.ModalUnavailable`): doubling up to the cap.
_RETRY_FIRST_S = 0.5
_RETRY_MAX_S = 30.0
#: How many log entries `ModalRunHandle.logs` fetches.
LOG_ENTRIES = 1000
#: Jobs that load a base model from the Hugging Face hub.
_MODEL_JOBS = ("train", "infer", "eval", "export")


class ModalRunHandle:
    """One call of a job function on Modal, seen from any process.

    `app` says which deployment runs it (`provider_app_id`, `provider_app_url`,
    `deployment_id`, as `trainkit app deploy` recorded them; empty when unknown).
    """

    def __init__(self, runner: ModalRunner, call_id: str, function: str, app: Mapping[str, str] | None = None) -> None:
        self._runner = runner
        self._sdk = runner.sdk
        self.call_id = call_id
        self.function = function
        self.app: dict[str, str] = dict(app or {})
        self._call = runner.sdk.FunctionCall.from_id(call_id)

    def __repr__(self) -> str:
        return f"<ModalRunHandle {self.call_id} {self.function}>"

    @property
    def _calls(self) -> ModalKV:
        return self._runner.calls

    def _error_text(self, exc: BaseException) -> str:
        ended = self._calls.get(ended_key(self.call_id)) or {}
        return str(ended.get("error") or f"{type(exc).__name__}: {exc}")

    def _poll(self, timeout: float) -> tuple[str, Any, str | None]:
        """(state, result, error) after waiting at most `timeout` seconds for a result."""
        try:
            result = self._call.get(timeout=timeout)
        except TimeoutError:
            if self._calls.get(cancel_key(self.call_id)) is not None:
                return "cancelled", None, "cancelled"
            started = self._calls.get(started_key(self.call_id)) is not None
            return ("running" if started else "pending"), None, None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # the job's own exception, unpickled, or Modal's about the call
            # Modal's service failing the request (a rate limit, an outage) says nothing about the
            # call: a trainkit error, never a "failed" state (the reconciler would end the run on it).
            # Job code never raises modal's exceptions (containers do not import the SDK).
            for name in errors.SERVICE:
                if _is_modal(exc, self._sdk, name):
                    raise errors.convert(exc, self._sdk, f"call {self.call_id}") from exc
            if self._calls.get(cancel_key(self.call_id)) is not None:
                return "cancelled", None, "cancelled"
            if _is_modal(exc, self._sdk, "OutputExpiredError"):
                return "failed", None, "the call's result expired (Modal keeps results for 7 days)"
            if _is_modal(exc, self._sdk, "FunctionTimeoutError"):
                return "failed", None, f"the job ran past its timeout: {exc}"
            return "failed", None, self._error_text(exc)
        return "succeeded", result, None

    def status(self) -> CallStatus:
        state, _, error = self._poll(0)
        started = self._calls.get(started_key(self.call_id)) or {}
        ended = self._calls.get(ended_key(self.call_id)) or {}
        ended_at = ended.get("ended_at") if state in ("succeeded", "failed", "cancelled") else None
        if state == "cancelled":
            ended_at = ended_at or (self._calls.get(cancel_key(self.call_id)) or {}).get("requested_at")
        return CallStatus(
            state=state,
            started_at=started.get("started_at"),
            ended_at=ended_at,
            exit_code=None,
            error=error,
        )

    def wait(self, timeout: float | None = None) -> Any:
        """The call's result; Modal's passing failures (`errors.ModalUnavailable`) are waited
        through, with a growing pause, until `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = _RETRY_FIRST_S
        while True:
            remaining = _WAIT_SLICE_S if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                state, result, error = self._poll(min(_WAIT_SLICE_S, remaining))
            except errors.ModalUnavailable as exc:
                if deadline is not None and time.monotonic() + backoff >= deadline:
                    raise JobTimeout(
                        f"job {self.function} ({self.call_id}): no answer from Modal within {timeout:g} s ({exc})"
                    ) from exc
                time.sleep(backoff)
                backoff = min(backoff * 2, _RETRY_MAX_S)
                continue
            backoff = _RETRY_FIRST_S
            if state == "succeeded":
                return result
            if state == "failed":
                raise JobError(f"job {self.function} ({self.call_id}) failed: {error}")
            if state == "cancelled":
                raise JobError(f"job {self.function} ({self.call_id}) was cancelled")
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeout(f"job {self.function} ({self.call_id}) still {state} after {timeout:g} s")

    def cancel(self) -> None:
        """Cancel the call and stop its container; safe on a call that already ended."""
        state, _, _ = self._poll(0)
        if state in ("succeeded", "failed", "cancelled"):
            return
        self._calls.put(cancel_key(self.call_id), {"requested_at": time.time()})
        with errors.translate(self._sdk, f"cancel call {self.call_id}"):
            self._call.cancel(terminate_containers=True)

    def logs(self, entries: int = LOG_ENTRIES) -> str:
        """The last `entries` lines the call printed, from Modal's logs (`FunctionCall.logs.tail`)."""
        with errors.translate(self._sdk, f"logs of call {self.call_id}"):
            return "".join(str(entry.message) for entry in self._call.logs.tail(entries=entries))


def _is_modal(exc: BaseException, sdk: Any, name: str) -> bool:
    cls = getattr(getattr(sdk, "exception", None), name, None)
    return isinstance(cls, type) and isinstance(exc, cls)


class ModalRunner:
    """The `run_function` answer of the Modal provider."""

    def __init__(self, sdk: Any, settings: Settings, spec: AppSpec | None = None) -> None:
        self.sdk = sdk
        self.settings = settings
        self._spec = spec
        self.calls = ModalKV.for_settings(sdk, settings, CALLS_NAMESPACE)

    @property
    def spec(self) -> AppSpec:
        """The app's routing (no images: this runs in the web container too, without package metadata)."""
        if self._spec is None:
            self._spec = routing_spec(self.settings)
        return self._spec

    @property
    def app_name(self) -> str:
        return self.settings.provider.app_name

    def model_config(self, function: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """What a call will load: `model_size` / `base_model` / `gpu`, read as every provider reads it.

        `trainkit_core.plugins.placement.call_config` on this app's run records and models
        volume: the train job gets only a run id, infer and eval a trained model's path.
        """
        from trainkit_core.plugins.placement import call_config
        from trainkit_modal.volume import ModalVolume

        if function not in _MODEL_JOBS:
            return dict(kwargs)  # e.g. gpu_ping's model_size
        runs = ModalKV.for_settings(self.sdk, self.settings, RUNS_NAMESPACE)
        return call_config(
            runs, function, kwargs, models=lambda: ModalVolume(self.sdk, self.settings.volumes.name_for("models"))
        )

    def _check_secret(self, config: Mapping[str, Any]) -> None:
        if self.spec.hf_secret:
            return
        model = base_model_of(dict(config))
        if is_gated(model):
            raise errors.hf_secret_missing(str(model))

    def resolve(self, function: str, kwargs: dict[str, Any]) -> tuple[FunctionSpec, str | None]:
        """The declared function for a call, and a GPU to ask for instead of its own (or None).

        A run may ask for its own GPU (`TrainConfig.gpu`): Modal then runs it in a pool
        of its own (`with_options`). Gated base models need the HF secret.
        """
        config = self.model_config(function, kwargs)
        target = target_for(self.spec, function, config)
        if function in _MODEL_JOBS:
            self._check_secret(config)
        wanted = check_gpu(config["gpu"], setting="the run's gpu") if config.get("gpu") else None
        if target.cluster_size > 1 and not wanted:
            raise UsageError(
                f"nodes={target.cluster_size} needs a GPU kind: Modal has no CPU-only clusters",
                hint="give the run a gpu (--gpu H100, or a GPU preset)",
            )
        return target, (wanted if wanted and wanted != target.gpu else None)

    def modal_class(self, target: FunctionSpec, gpu: str | None) -> Any:
        """An instance handle of the app's class, on `gpu` when given.

        In a container of the app (its web API), the class of that same app, deployed or
        ephemeral (`own_app.lookup`); elsewhere the deployed one (`Cls.from_name`).
        """
        cls = own_app.lookup(self.sdk, "class", self.app_name, target.name)
        return (cls.with_options(gpu=gpu) if gpu else cls)()

    def _start(self, target: FunctionSpec, kwargs: dict[str, Any], gpu: str | None) -> Any:
        where = f"spawn {target.name} in app {self.app_name}"
        try:
            with errors.translate(self.sdk, where):
                if target.kind == "class":
                    return self.modal_class(target, gpu).run.spawn(kwargs)
                fn = own_app.lookup(self.sdk, "function", self.app_name, target.name)
                if gpu:
                    fn = fn.with_options(gpu=gpu)
                return fn.spawn(**kwargs)
        except NotFoundError:
            raise errors.app_not_deployed(self.app_name, target.name) from None

    def spawn(self, function: str, kwargs: Mapping[str, Any], placement: Placement | None = None) -> ModalRunHandle:
        """Start a call on its declared function. `placement` agrees with what the app declares per
        size (both follow the presets, `TRAINKIT_GPU` and the run's `gpu`), so the app's own routing
        (`resolve`) decides."""
        args = call_kwargs(kwargs)
        target, gpu = self.resolve(function, args)
        call = self._start(target, args, gpu)
        call_id = call.object_id
        app = self.app_info()
        self.calls.put(
            record_key(call_id),
            {
                "call_id": call_id,
                "function": function,
                "modal_function": target.name,
                "created_at": time.time(),
                "app": app,
            },
        )
        return ModalRunHandle(self, call_id, function, app)

    def app_info(self) -> dict[str, str]:
        """The app the calls run in: this container's own app, or the one this process runs (`modal run`),
        when it is not the recorded deployment (an ephemeral dev app), else the deployment
        `trainkit app deploy` recorded; {} when none is known."""
        known = deployment_record(self.sdk, self.settings) or {}
        own = own_app.container_app_id(self.sdk) or own_app.running_app_id(self.app_name)
        if own and own != known.get("app_id"):
            return {"provider_app_id": own, "provider_app_url": f"https://modal.com/id/{own}", "deployment_id": ""}
        if not known.get("app_id"):
            return {}
        return {
            "provider_app_id": str(known["app_id"]),
            "provider_app_url": str(known.get("app_url") or ""),
            "deployment_id": str(known.get("deployment_id") or ""),
        }

    def get(self, call_id: str) -> ModalRunHandle:
        if not isinstance(call_id, str) or not call_id.startswith("fc-") or not call_id[3:].isalnum():
            raise UsageError(f"{call_id!r} is not a Modal call id (fc-…)")
        record = self.calls.get(record_key(call_id))
        if record is None:
            raise NotFoundError(f"no Modal job call {call_id!r} started by trainkit app {self.app_name!r}")
        return ModalRunHandle(self, call_id, record["function"], record.get("app"))


__all__ = ["ModalRunHandle", "ModalRunner"]
