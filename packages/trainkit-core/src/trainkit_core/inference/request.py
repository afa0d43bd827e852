"""The generation request, shared by the CLI, the API, the infer job and the warm servers.

Plain pydantic, no heavy imports. One of `prompt` or `messages`; `model_path` (a
trained model) or `model_size` (the short form: that preset's newest trained
model). `base=True` generates with the model's base alone, for comparison.
Sampling: `temperature` 0 means greedy (the default, so answers are reproducible);
`top_k` 0 means no top-k cut. With `tools`, the model may answer with calls
(`trainkit_core.models.tool_syntax` reads them); the conversation may then go on with
the calls and the ``tool`` messages that answer them, as in OpenAI's API.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trainkit_core.datasets.audio import AudioLimits, as_openai_part
from trainkit_core.datasets.images import ImageLimits
from trainkit_core.errors import InputTooLargeError, UsageError

#: The longest image data URL a request may carry (characters): 20 MiB of image in base64.
MAX_DATA_URL_CHARS = 28 * 1024 * 1024
#: The longest base64 audio a request part may carry (characters): 12 MiB of sound (`AudioLimits`'
#: default) is 16 MiB in base64, and a little room. Checked before the base64 is decoded.
MAX_AUDIO_DATA_CHARS = 17 * 1024 * 1024
#: The most characters of text a request may carry, all turns together. A first, cheap bound,
#: checked before any model is near: no model trainkit trains reads more than 262,144
#: tokens, and text takes more than one character a token on average (English about 4),
#: so no prompt over it fits a context. The real bound is the model's context, checked in
#: tokens where the model is loaded (`trainkit_core.inference.generation.check_context`).
MAX_PROMPT_CHARS = 2_000_000
#: The most bytes a request within the bounds takes as JSON: its text escaped (at most 12
#: bytes a character, a surrogate pair's two ``\\uXXXX``), the most images and sounds, and room
#: for the rest. A ``--messages`` file or a body to the warm worker over it cannot be a valid request.
MAX_REQUEST_BYTES = (
    12 * MAX_PROMPT_CHARS
    + ImageLimits().max_per_example * MAX_DATA_URL_CHARS
    + AudioLimits().max_per_example * MAX_AUDIO_DATA_CHARS
    + 1024 * 1024
)


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"]
    text: str


class ImageURL(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str  # its length is bounded by `GenerateRequest._sizes` (a 413 naming the part)
    detail: str | None = None  # OpenAI's; accepted and ignored (the processor decides the size)


class ImagePart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["image_url"]
    image_url: ImageURL


class InputAudio(BaseModel):
    """OpenAI's ``input_audio``: base64 bytes and their format. A path (datasets' form) is not taken here:
    it would read the server's files."""

    model_config = ConfigDict(extra="forbid")

    data: str  # its length is bounded by `GenerateRequest._sizes` (a 413 naming the part)
    format: str  # wav or mp3: checked by `check_request_audio`, which names the part


class AudioPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["input_audio"]
    input_audio: InputAudio


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    #: A JSON object, as a string (OpenAI's form) or as the object itself.
    arguments: str | dict[str, Any] = "{}"


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCall


class Tool(BaseModel):
    """A function the model may call (OpenAI's definition: name, description, JSON-schema parameters)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["function"] = "function"
    function: dict[str, Any]

    @field_validator("function")
    @classmethod
    def _named(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("name"), str) or not value["name"]:
            raise ValueError("a tool's function needs a name")
        if "parameters" in value and not isinstance(value["parameters"], dict):
            raise ValueError(f"tool {value['name']!r}: parameters must be a JSON schema object")
        return value


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[Annotated[TextPart | ImagePart | AudioPart, Field(discriminator="type")]] = ""
    #: An assistant's calls earlier in the conversation, and a tool message's answer to one.
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _content_given(cls, data: Any) -> Any:
        """Content may be left out (or null) only by an assistant message that calls tools, as OpenAI's."""
        if isinstance(data, dict) and data.get("content") is None:
            if not (data.get("role") == "assistant" and data.get("tool_calls")):
                raise ValueError("content is required (only an assistant message with tool_calls may leave it out)")
            data = {**data, "content": ""}
        return data

    @model_validator(mode="after")
    def _tool_fields(self) -> Message:
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError(f"tool_calls on a {self.role} message; only an assistant's message calls tools")
        if (self.tool_call_id is None) == (self.role == "tool"):
            raise ValueError("a tool message needs tool_call_id (the call it answers), and only a tool message has one")
        return self

    @field_validator("content", mode="before")
    @classmethod
    def _parts_given(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("an empty list of parts; give text, or text and image_url or input_audio parts")
        return value


class GenerateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_path: str | None = None
    model_size: str | None = None
    prompt: str | None = None
    messages: list[Message] | None = None
    base: bool = False
    max_new_tokens: int = Field(128, ge=1, le=4096)
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, le=10_000)
    seed: int | None = Field(None, ge=0, le=2**32 - 1)
    #: Images for the (last) user turn, as ``data:image/...;base64,`` URLs (`trainkit infer --image`).
    images: list[str] | None = None
    #: Sounds for the (last) user turn, as ``data:audio/wav;base64,`` (or mp3) URLs (`trainkit infer --audio`).
    audio: list[str] | None = None
    #: Functions the model may call; its calls come back as ``tool_calls`` (`trainkit infer --tools`).
    tools: list[Tool] | None = Field(None, max_length=128)
    #: Ask a Gemma 4 model to think first (its ``<|think|>`` switch; `trainkit infer --think`). None:
    #: only where the conversation already holds thinking. Gemma 3 has no thinking and ignores it.
    think: bool | None = None
    #: True where the caller fetches or refuses http(s) image URLs itself, then validates again (the API).
    remote_images_resolved_later: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _sizes(cls, data: Any) -> Any:
        """`InputTooLargeError` (HTTP 413) for text or an image over its bound, before anything else is parsed."""
        if isinstance(data, dict):
            check_sizes(data)
        return data

    @model_validator(mode="after")
    def _one_input(self) -> GenerateRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt or messages")
        if self.messages is not None:
            if not self.messages:
                raise ValueError("messages is empty")
            if self.messages[-1].role not in ("user", "tool"):
                raise ValueError("the last message must be the user's (or a tool's answer)")
        if self.model_path is None and self.model_size is None:
            raise ValueError("give model_path (trained/<run id>) or model_size (a preset)")
        if self.model_path is not None and self.model_size is not None:
            raise ValueError("give model_path or model_size, not both")
        from trainkit_core.inference.request_audio import check_request_audio
        from trainkit_core.inference.request_images import check_request_images

        turns = self.chat()
        check_request_images(turns, remote_ok=self.remote_images_resolved_later)
        check_request_audio(turns)
        return self

    @field_validator("audio")
    @classmethod
    def _audio_urls(cls, value: list[str] | None) -> list[str] | None:
        """Each a base64 audio data URL (its bytes are checked with the conversation's, naming the part)."""
        for index, url in enumerate(value or []):
            if "data" not in as_openai_part(url)["input_audio"]:
                raise ValueError(f"audio[{index}] is not a data:audio/wav;base64,... (or mp3) URL")
        return value

    def chat(self) -> list[dict[str, Any]]:
        """The conversation to format: `messages`, or `prompt` as one user turn; `images`, then `audio`, join
        the last user turn."""
        if self.messages is not None:
            turns = [m.model_dump(exclude_none=True) for m in self.messages]
            for turn in turns:
                for call in turn.get("tool_calls", []):
                    call["function"]["arguments"] = _arguments(call["function"]["arguments"])
        else:
            turns = [{"role": "user", "content": self.prompt or ""}]
        added = [{"type": "image_url", "image_url": {"url": url}} for url in self.images or []]
        added += [as_openai_part(url) for url in self.audio or []]
        if added:
            last = turns[-1]
            parts = (
                last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
            )
            turns[-1] = {**last, "content": parts + added}
        return turns

    def tool_list(self) -> list[dict[str, Any]] | None:
        return [t.model_dump() for t in self.tools] if self.tools else None

    @property
    def has_images(self) -> bool:
        """Whether the request goes through the model's processor: it holds images or audio (a list content)."""
        return any(isinstance(m["content"], list) for m in self.chat())

    @property
    def has_audio(self) -> bool:
        """Whether the request holds sound: only a model with an audio tower takes it."""
        return any(
            isinstance(m["content"], list) and any(p["type"] == "input_audio" for p in m["content"])
            for m in self.chat()
        )

    @classmethod
    def parse(cls, data: Any) -> GenerateRequest:
        """Validate a request dict; `UsageError` naming each bad field."""
        if isinstance(data, GenerateRequest):
            return data
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                (".".join(map(str, e["loc"])) + ": " if e["loc"] else "") + e["msg"].removeprefix("Value error, ")
                for e in exc.errors()
            )
            raise UsageError(f"invalid generation request: {problems}") from None


def _arguments(value: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    import json

    try:
        parsed = json.loads(value) if value.strip() else {}
    except ValueError:
        raise UsageError(f"a tool call's arguments are not JSON: {value[:60]!r}") from None
    if not isinstance(parsed, dict):
        raise UsageError(f"a tool call's arguments must be a JSON object, got {value[:60]!r}")
    return parsed


def check_sizes(data: dict[str, Any]) -> None:
    """`InputTooLargeError` naming the first image data URL over `MAX_DATA_URL_CHARS`, base64 audio over
    `MAX_AUDIO_DATA_CHARS`, or the text over `MAX_PROMPT_CHARS`, of a raw request dict (anything malformed
    is left to the schema)."""
    chars = len(data["prompt"]) if isinstance(data.get("prompt"), str) else 0
    messages = data.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        for position, part in enumerate(content if isinstance(content, list) else []):
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                chars += len(part["text"])
            image_url = part.get("image_url")
            url = image_url.get("url") if isinstance(image_url, dict) else image_url
            _check_url(url, f"messages[{index}].content[{position}]")
            audio = part.get("input_audio")
            _check_audio(
                audio.get("data") if isinstance(audio, dict) else None, f"messages[{index}].content[{position}]"
            )
    images = data.get("images")
    for index, url in enumerate(images if isinstance(images, list) else []):
        _check_url(url, f"images[{index}]")
    sounds = data.get("audio")
    for index, url in enumerate(sounds if isinstance(sounds, list) else []):
        _check_audio(url, f"audio[{index}]")
    if chars > MAX_PROMPT_CHARS:
        raise InputTooLargeError(
            f"prompt/messages: {chars} characters of text, over the limit of {MAX_PROMPT_CHARS} "
            "(longer than any model's context)"
        )


def _check_url(url: Any, where: str) -> None:
    if isinstance(url, str) and len(url) > MAX_DATA_URL_CHARS:
        raise InputTooLargeError(
            f"{where}: an image URL of {len(url)} characters, over the limit of {MAX_DATA_URL_CHARS} "
            "(a data URL of 20 MiB of image)"
        )


def _check_audio(data: Any, where: str) -> None:
    if isinstance(data, str) and len(data) > MAX_AUDIO_DATA_CHARS:
        raise InputTooLargeError(
            f"{where}: {len(data)} characters of base64 audio, over the limit of {MAX_AUDIO_DATA_CHARS} "
            "(12 MiB of sound in base64)"
        )
