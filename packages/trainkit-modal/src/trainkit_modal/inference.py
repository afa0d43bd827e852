"""The warm inference of the Modal provider (the `inference_server` hook's answer).

Requests go straight to the deployed inference class of the model's size
(`Inference_<size>`): `generate.remote(request)` for one answer,
`stream.remote_gen(request)` for token events. Its containers keep loaded models for
`TRAINKIT_INFER_IDLE_TIMEOUT_S` (the class's `scaledown_window`), so a request within
that window skips the model load. The model path is validated again in the container
before anything is read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trainkit_core.errors import NotFoundError
from trainkit_core.plugins.provider import call_kwargs
from trainkit_modal import errors
from trainkit_modal.function_runner import ModalRunner
from trainkit_modal.spec import INFER_JOB


class ModalInferenceServer:
    """`generate` / `stream` on the warm inference class of the request's model size."""

    def __init__(self, runner: ModalRunner) -> None:
        self.runner = runner

    def _instance(self, request: dict[str, Any]) -> tuple[Any, str]:
        target, gpu = self.runner.resolve(INFER_JOB, request)
        return self.runner.modal_class(target, gpu), target.name

    def generate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        body = call_kwargs(request)
        instance, name = self._instance(body)
        try:
            with errors.translate(self.runner.sdk, f"generate on {name}"):
                return instance.generate.remote(body)  # type: ignore[no-any-return]
        except NotFoundError as exc:
            raise _not_found(exc, self.runner.app_name, name) from None

    def stream(self, request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        body = call_kwargs(request)
        instance, name = self._instance(body)
        try:
            with errors.translate(self.runner.sdk, f"stream on {name}"):
                yield from instance.stream.remote_gen(body)
        except NotFoundError as exc:
            raise _not_found(exc, self.runner.app_name, name) from None


def _not_found(exc: NotFoundError, app_name: str, name: str) -> NotFoundError:
    """Modal's own not-found (translated, so it has a cause) means the class is not deployed; one the
    container raised (a model that does not exist) is the user's and passes unchanged."""
    return errors.app_not_deployed(app_name, name) if exc.__cause__ is not None else exc
