"""The provider-neutral entry the CLI and the API call to generate.

    from trainkit_core.inference.client import generate
    result = generate(provider, {"model_path": "trained/run-…", "prompt": "hi"})

The model path is checked here first (text, then the models volume), so a hostile
path is refused before anything starts. Then, where the provider has warm inference
(`Provider.inference_server()`: locally the warm worker process, on Modal the
inference class), the request goes there; otherwise the ``infer`` job runs through
`run_function`. No heavy imports: the models are loaded by the server or the job.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trainkit_core import errors
from trainkit_core.inference.request import GenerateRequest
from trainkit_core.models.trained import ModelPath, check_model_path, default_model_for_preset, read_card

#: How long the client waits for an infer job when there is no warm server.
JOB_TIMEOUT_S = 1800.0


def prepare(provider: Any, request: Mapping[str, Any] | GenerateRequest) -> GenerateRequest:
    """Validate a request and resolve its model: `model_size` becomes that preset's newest model."""
    req = GenerateRequest.parse(request)
    models = provider.volume("models")
    if req.model_path is not None:
        ref = check_model_path(req.model_path, models)
    else:
        ref = default_model_for_preset(models, req.model_size or "")
    if req.has_audio:
        _check_takes_audio(models, ref)
    return req.model_copy(update={"model_path": ref.path, "model_size": None})


def _check_takes_audio(models: Any, ref: ModelPath) -> None:
    """`UsageError` (400) for sound sent to a model trained from a preset without an audio tower.

    Known from its card, before any model loads: a streamed answer would otherwise start,
    and then fail in the worker. A model of a custom base (no preset on its card) is left
    to the worker, which refuses sound where the model's processor has no audio part.
    """
    from trainkit_core.models.presets import PRESETS, TWIN_PRESETS

    card = read_card(models, ref)
    preset = PRESETS.get(card.preset) or TWIN_PRESETS.get(card.preset)
    if preset is not None and not preset.audio:
        with_audio = ", ".join(name for name, p in PRESETS.items() if p.audio)
        raise errors.UsageError(
            f"{ref.path} (preset {card.preset}, base {card.base_model}) has no audio tower: it takes no audio",
            hint=f"send the audio to a model trained from a preset with one ({with_audio})",
        )


def wait_answer(handle: Any, timeout: float | None) -> dict[str, Any]:
    """The result of an ``infer`` job call; the job's refusal of the request keeps its own type.

    A job's failure comes back as `JobError` ("job infer (id) failed: Type: message");
    where Type is one of trainkit's errors of a 4xx (the prompt past the model's context,
    images to a text-only model), that error is raised again, so the CLI exits with its
    code and the API answers its status, as they do when the warm worker refuses it.
    """
    try:
        return dict(handle.wait(timeout=timeout))
    except errors.JobError as exc:
        refused = _refusal(exc.message)
        if refused is None:
            raise
        raise refused from None


def _refusal(text: str) -> errors.TrainkitError | None:
    name, _, rest = text.partition(" failed: ")[2].partition(": ")
    cls = getattr(errors, name, None) if name.isidentifier() else None
    if not (isinstance(cls, type) and issubclass(cls, errors.TrainkitError) and cls.http_status < 500):
        return None
    message, _, hint = rest.partition("\n  hint: ")
    return cls(message, hint=hint or None)


def _server(provider: Any, use_server: bool | None) -> Any:
    if use_server is False or not provider.capabilities.warm_inference:
        return None
    return provider.inference_server()


def generate(
    provider: Any,
    request: Mapping[str, Any] | GenerateRequest,
    *,
    use_server: bool | None = None,
    timeout: float = JOB_TIMEOUT_S,
) -> dict[str, Any]:
    """Generate one answer. `use_server=False` forces the infer job (no warm process)."""
    req = prepare(provider, request)
    provider.deployment().check(["infer"])
    server = _server(provider, use_server)
    payload = req.model_dump(mode="json")
    if server is not None:
        return dict(server.generate(payload))
    return wait_answer(provider.spawn("infer", **payload), timeout)


def stream(
    provider: Any,
    request: Mapping[str, Any] | GenerateRequest,
    *,
    use_server: bool | None = None,
    timeout: float = JOB_TIMEOUT_S,
) -> Iterator[dict[str, Any]]:
    """Yield token events as they come, then the `done` event with the whole result.

    Without a warm server, the infer job's answer comes at once, as one token event.
    """
    req = prepare(provider, request)
    provider.deployment().check(["infer"])
    server = _server(provider, use_server)
    payload = req.model_dump(mode="json")
    if server is not None:
        yield from server.stream(payload)
        return
    result = wait_answer(provider.spawn("infer", **payload), timeout)
    yield {"type": "token", "text": result.get("text", "")}
    yield {"type": "done", **result}
