"""Generation: trainkit's own `POST /v1/generate`, and OpenAI's `POST /v1/chat/completions`.

Both go through `trainkit_core.inference.client` (the warm inference server where the
provider has one, else the ``infer`` job). The request is validated and its model
path checked *before* a stream starts, so a bad request gets a 4xx, not a broken
stream. For chat completions `model` is a model path (``trained/<run id>``, or one of
its checkpoints), a preset name (that preset's newest trained model, as
``--model-size`` picks it), and either one with ``:base`` appended generates with its base
model alone. Without `temperature` the answer is greedy (trainkit's default), not
OpenAI's 1.0, so that the same request gives the same answer.

Where the host cuts a request off (a Modal web endpoint answers a request still running
after 150 s with a redirect), the app is built with `answer_within_s`: a generation
then runs as an ``infer`` job call, and one not done within that time is answered
``202 Accepted`` with ``{"id", "status": "pending"}`` and ``Location:
/v1/generate/<id>``; ``GET`` there answers 202 again while it runs, then the result (or
the job's error). A cold GPU container (a model load of minutes) never holds a request
past the limit. Streams start at once (an SSE comment), so the connection carries data
from the first second. A non-streamed chat completion cannot answer 202 (OpenAI's
clients know no such answer), so there the response starts once the answer is not back
within `KEEPALIVE_EVERY_S`: status 200 and ``application/json``, a space every few
seconds (whitespace before a JSON value is insignificant, so every JSON parser reads the
body unchanged), then the completion. Every error known before that point (bad input, an
unknown model, a job that failed fast) keeps its own status; one that comes after can
only be the body: OpenAI's error object ``{"error": {"type", "message"}}`` with status 200.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES, type_of
from trainkit_api.remote_images import resolve_remote_images
from trainkit_api.sse import HEADERS, format_event
from trainkit_api.state import ApiState, get_state
from trainkit_core.errors import JobTimeout, NotFoundError, TrainkitError, UsageError
from trainkit_core.inference.request import GenerateRequest


class GenerateBody(GenerateRequest):
    """A `GenerateRequest`, plus `stream` to get the answer as server-sent events.

    Its http(s) image URLs pass this first check: the route refuses or fetches them
    (`resolve_remote_images`), then checks the whole request again.
    """

    remote_images_resolved_later: ClassVar[bool] = True

    stream: bool = Field(False, description="Answer as `text/event-stream`: `token` events, then `done`.")


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class GenerateResult(BaseModel):
    model_config = ConfigDict(extra="allow", protected_namespaces=())

    text: str
    model_path: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = Field(
        None,
        description=(
            "Text, or a list of `{type: text, text}`, `{type: image_url, image_url: {url: data:...}}` and "
            "`{type: input_audio, input_audio: {data: BASE64, format: wav | mp3}}` parts (pictures and sounds in "
            "user or system messages); http(s) image URLs only where the server allows fetching "
            "(TRAINKIT_API_FETCH_IMAGE_URLS). Left out only by an assistant message with `tool_calls`."
        ),
    )
    tool_calls: list[dict[str, Any]] | None = Field(None, description="An assistant's earlier calls (OpenAI's form).")
    tool_call_id: str | None = Field(None, description="A tool message: the call it answers.")

    @field_validator("content")
    @classmethod
    def _parts_given(cls, value: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        if isinstance(value, list) and not value:  # OpenAI refuses it too; an empty prompt is no question
            raise ValueError("an empty list of parts; give text, or text and image_url or input_audio parts")
        return value


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat-completion request; fields trainkit does not use are accepted and ignored."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())

    model: str = Field(
        min_length=1, max_length=300, description="`trained/<run id>`, a preset name; `:base` for its base."
    )
    messages: list[ChatMessageIn] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1, le=4096)
    max_completion_tokens: int | None = Field(None, ge=1, le=4096)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=0, le=2**32 - 1)
    n: int = Field(1, ge=1, le=1, description="Only 1 is supported.")
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[dict[str, Any]] | None = Field(
        None, description="Functions the model may call (OpenAI's `{type: function, function: {...}}`)."
    )
    tool_choice: str | dict[str, Any] | None = Field(
        None,
        description="`auto` (the default with tools) or `none`; `required` and a named function are refused: "
        "trainkit does not constrain decoding.",
    )
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = Field(
        None,
        description="A Gemma 4 model thinks first for `low` and above (its thinking switch), not for `none` or "
        "`minimal`; left out: only where the conversation holds thinking. Gemma 3 models do not think.",
    )


class FunctionOut(BaseModel):
    name: str
    arguments: str = Field(description="The arguments as a JSON string, as OpenAI sends them.")


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionOut


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCallOut] | None = None
    reasoning_content: str | None = Field(None, description="The model's thinking, where it thought (Gemma 4).")

    @model_serializer(mode="wrap")
    def _only_what_is_there(self, handler: Any) -> dict[str, Any]:
        """A plain answer stays ``{"role", "content"}``; calls and thinking appear where the model made them."""
        data: dict[str, Any] = handler(self)
        for key in ("tool_calls", "reasoning_content"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class Choice(BaseModel):
    index: int = 0
    message: ChatMessageOut
    finish_reason: str
    logprobs: None = None


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: ChatUsage


SSE_DOC = {"text/event-stream": {"schema": {"type": "string"}}}


def _content(content: str | list[dict[str, Any]], where: str) -> str | list[dict[str, Any]]:
    """A message's content for trainkit: text, or text, ``image_url`` and ``input_audio`` parts (their bytes
    checked by `GenerateRequest`, which names the part)."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            image_url = part.get("image_url")
            url = image_url.get("url") if isinstance(image_url, dict) else image_url
            if not isinstance(url, str):
                raise UsageError(f'{where}.content[{i}]: an image_url part needs "image_url": {{"url": "data:..."}}')
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif kind == "input_audio":
            audio = part.get("input_audio")
            data, fmt = (audio.get("data"), audio.get("format")) if isinstance(audio, dict) else (None, None)
            if not isinstance(data, str) or not isinstance(fmt, str):
                raise UsageError(
                    f'{where}.content[{i}]: an input_audio part needs "input_audio": '
                    '{"data": "<base64>", "format": "wav" or "mp3"}'
                )
            parts.append({"type": "input_audio", "input_audio": {"data": data, "format": fmt}})
        else:
            raise UsageError(f"{where}.content[{i}]: only text, image_url and input_audio parts are supported")
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def generate_request(body: ChatCompletionRequest, state: ApiState | None = None) -> dict[str, Any]:
    """The trainkit generation request for an OpenAI chat-completion request.

    With `state`, a fine-tuning job's `ft:` name (`trainkit_api.fine_tuning.names`) stands
    for its trained model or checkpoint.
    """
    from trainkit_core.models.presets import PRESETS

    model, base = body.model, False
    if model.endswith(":base"):
        model, base = model.removesuffix(":base"), True
    if state is not None and model.startswith("ft:"):
        from trainkit_api.fine_tuning.jobs import fine_tuned_model_path

        model = fine_tuned_model_path(state, model)
    if not model.startswith("trained/") and model not in PRESETS:
        shown = model if len(model) <= 60 else model[:60] + "…"
        raise UsageError(
            f"model {shown!r} is neither a trained model (trained/<run id>) nor a model size; "
            f"known sizes: {', '.join(PRESETS)}",
            hint="GET /v1/models lists the trained models",
        )
    target = {"model_path": model} if model.startswith("trained/") else {"model_size": model}
    messages = []
    for i, message in enumerate(body.messages):
        role = "system" if message.role == "developer" else message.role
        turn: dict[str, Any] = {"role": role}
        if message.content is not None:
            turn["content"] = _content(message.content, f"messages[{i}]")
        for key in ("tool_calls", "tool_call_id"):
            if getattr(message, key) is not None:
                turn[key] = getattr(message, key)
        messages.append(turn)
    request: dict[str, Any] = {**target, "messages": messages, "base": base}
    if body.tools and _offers_tools(body.tool_choice):
        request["tools"] = body.tools
    if body.reasoning_effort is not None:
        request["think"] = body.reasoning_effort not in ("none", "minimal")
    max_tokens = body.max_completion_tokens or body.max_tokens
    if max_tokens is not None:
        request["max_new_tokens"] = max_tokens
    for name in ("temperature", "top_p", "seed"):
        if getattr(body, name) is not None:
            request[name] = getattr(body, name)
    return request


def _offers_tools(choice: str | dict[str, Any] | None) -> bool:
    """Whether the model gets the tools: `auto` yes, `none` no; what trainkit cannot enforce is refused."""
    if choice is None or choice == "auto":
        return True
    if choice == "none":
        return False
    shown = choice if isinstance(choice, str) else json.dumps(choice)[:80]
    raise UsageError(
        f"tool_choice {shown!r} is not supported: trainkit does not constrain what the model writes, so it "
        "cannot force a call",
        hint='leave tool_choice out (or "auto"): a model trained on your calls calls them',
    )


def message_out(result: dict[str, Any]) -> ChatMessageOut:
    """The assistant's message of a generation result: text, or calls (arguments as JSON strings), and thinking."""
    calls = result.get("tool_calls") or []
    return ChatMessageOut(
        content=result.get("text", "") if not calls or result.get("text") else None,
        tool_calls=[
            ToolCallOut(
                id=call["id"],
                function=FunctionOut(
                    name=call["function"]["name"], arguments=json.dumps(call["function"]["arguments"])
                ),
            )
            for call in calls
        ]
        or None,
        reasoning_content=result.get("reasoning_content"),
    )


def _error_event(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, TrainkitError):
        return {"error": {"type": type_of(exc), "message": exc.message}}
    return {"error": {"type": "server_error", "message": "generation failed; the server's log has the details"}}


log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", tags=["generate"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)

#: An SSE comment: clients ignore it; it starts the response before the first token.
STARTED = ": started\n\n"


class Pending(BaseModel):
    """A generation still running: fetch it with `GET /v1/generate/{id}` (the `Location`)."""

    id: str
    status: Literal["pending"] = "pending"


#: How often a chat completion still running sends a space: far below Modal's 150 s
#: and any proxy's idle limit, and the first answer's wait before the response starts.
KEEPALIVE_EVERY_S = 5.0


def _pending(call_id: str) -> JSONResponse:
    return JSONResponse(
        Pending(id=call_id).model_dump(), status_code=202, headers={"Location": f"/v1/generate/{call_id}"}
    )


def _answer_in_time(state: ApiState, request: GenerateRequest) -> Any:
    """The answer if it comes within `answer_within_s`, else 202 and where to fetch it.

    The generation runs as an ``infer`` job call, which any container of the app can
    find again by its id (a web endpoint's next request may reach another container).
    """
    state.provider.deployment().check(["infer"])
    from trainkit_core.inference.client import wait_answer

    handle = state.provider.spawn("infer", **request.model_dump(mode="json"))
    try:
        result = wait_answer(handle, state.answer_within_s)
    except JobTimeout:
        return _pending(handle.call_id)
    return GenerateResult.model_validate(result)


def _completion_kept_alive(
    state: ApiState, request: GenerateRequest, completion: Callable[[dict[str, Any]], ChatCompletion]
) -> Any:
    """The completion at once if it is back within `KEEPALIVE_EVERY_S`, else a body kept alive with spaces.

    Like `_answer_in_time`, the generation is an ``infer`` job call: waiting on it in
    slices is what lets the response send something between them.
    """
    from trainkit_core.inference.client import wait_answer

    state.provider.deployment().check(["infer"])
    handle = state.provider.spawn("infer", **request.model_dump(mode="json"))
    every = min(KEEPALIVE_EVERY_S, state.answer_within_s or KEEPALIVE_EVERY_S)
    try:
        return completion(wait_answer(handle, every))
    except JobTimeout:
        pass  # still running (a cold container's model load): start the response now

    def body() -> Iterator[str]:
        while True:
            yield " "
            try:
                result = wait_answer(handle, every)
            except JobTimeout:
                continue
            except Exception as exc:
                if not isinstance(exc, TrainkitError):
                    log.exception("chat completion %s failed after its response started", handle.call_id)
                yield json.dumps(_error_event(exc))
                return
            yield completion(dict(result)).model_dump_json()
            return

    return StreamingResponse(body(), media_type="application/json", headers=HEADERS)


@router.get(
    "/generate/{call_id}",
    response_model=GenerateResult,
    responses={202: {"model": Pending, "description": "Still running: ask again."}},
)
def generate_result(call_id: str, state: ApiState = Depends(get_state)) -> Any:
    """The answer of a generation answered 202 before: 202 again while it runs."""
    handle = state.provider.call(call_id)
    if handle.function != "infer":
        raise NotFoundError(f"no generation {call_id!r}")
    from trainkit_core.inference.client import wait_answer

    try:
        result = wait_answer(handle, state.answer_within_s or 0)
    except JobTimeout:
        return _pending(call_id)
    return GenerateResult.model_validate(result)


@router.post(
    "/generate",
    response_model=GenerateResult,
    responses={200: {"description": "The answer; with `stream`, server-sent events.", "content": SSE_DOC}},
)
def generate(body: GenerateBody, state: ApiState = Depends(get_state)) -> Any:
    """Generate with a trained model (`model_path`) or a preset's newest (`model_size`)."""
    from trainkit_core.inference import client

    payload = resolve_remote_images(body.model_dump(exclude={"stream"}), state.settings)
    request = client.prepare(state.provider, payload)  # 4xx now, before any stream
    if not body.stream:
        if state.answer_within_s is not None:
            return _answer_in_time(state, request)
        return GenerateResult.model_validate(client.generate(state.provider, request))

    def events() -> Iterator[str]:
        yield STARTED  # the response starts now, whatever the model load takes
        try:
            for event in client.stream(state.provider, request):
                yield format_event(event, event=str(event.get("type", "token")))
        except Exception as exc:
            yield format_event(_error_event(exc), event="error")

    return StreamingResponse(events(), media_type="text/event-stream", headers=HEADERS)


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={200: {"description": "OpenAI's chat completion; with `stream`, its chunks as SSE.", "content": SSE_DOC}},
)
def chat_completions(body: ChatCompletionRequest, state: ApiState = Depends(get_state)) -> Any:
    """OpenAI-compatible chat completion with a trained model (`stream` supported)."""
    from trainkit_core.inference import client

    request = client.prepare(state.provider, resolve_remote_images(generate_request(body, state), state.settings))
    completion_id = "chatcmpl-" + uuid.uuid4().hex[:24]
    created = int(time.time())
    if not body.stream:

        def completion(result: dict[str, Any]) -> ChatCompletion:
            usage = result.get("usage") or {}
            prompt, done = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
            return ChatCompletion(
                id=completion_id,
                created=created,
                model=body.model,
                choices=[Choice(message=message_out(result), finish_reason=result.get("finish_reason") or "stop")],
                usage=ChatUsage(prompt_tokens=prompt, completion_tokens=done, total_tokens=prompt + done),
            )

        if state.answer_within_s is not None:
            return _completion_kept_alive(state, request, completion)
        return completion(client.generate(state.provider, request))
    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": body.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            **extra,
        }
        return format_event(data)

    # A call is only known once the model's answer is whole: with tools the answer is
    # sent when done, as OpenAI's deltas (thinking, text, then each call).
    buffered = bool(request.tools)

    def message_chunks(message: ChatMessageOut) -> Iterator[str]:
        if message.reasoning_content:
            yield chunk({"reasoning_content": message.reasoning_content})
        if message.content:
            yield chunk({"content": message.content})
        for index, call in enumerate(message.tool_calls or []):
            yield chunk({"tool_calls": [{"index": index, **call.model_dump()}]})

    def chunks() -> Iterator[str]:
        yield STARTED
        yield chunk({"role": "assistant", "content": ""})
        try:
            for event in client.stream(state.provider, request):
                if event.get("type") == "token" and event.get("text") and not buffered:
                    yield chunk({"content": event["text"]})
                elif event.get("type") == "thinking" and event.get("text") and not buffered:
                    yield chunk({"reasoning_content": event["text"]})  # as OpenAI-compatible servers stream it
                elif event.get("type") == "done":
                    if buffered:
                        yield from message_chunks(message_out(event))
                    yield chunk({}, event.get("finish_reason") or "stop")
                    if include_usage:
                        usage = event.get("usage") or {}
                        prompt, completion = (
                            int(usage.get("prompt_tokens", 0)),
                            int(usage.get("completion_tokens", 0)),
                        )
                        total = {
                            "prompt_tokens": prompt,
                            "completion_tokens": completion,
                            "total_tokens": prompt + completion,
                        }
                        yield format_event(
                            {
                                "id": completion_id,
                                "object": "chat.completion.chunk",
                                "created": created,
                                "model": body.model,
                                "choices": [],
                                "usage": total,
                            }
                        )
        except Exception as exc:
            yield format_event(_error_event(exc))
        yield format_event("[DONE]")

    return StreamingResponse(chunks(), media_type="text/event-stream", headers=HEADERS)


def build_router() -> APIRouter:
    return router
