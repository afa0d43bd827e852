"""The generation request, shared by the CLI, the API, the infer job and the warm servers.

Plain pydantic, no heavy imports. One of `prompt` or `messages`; `model_path` (a
trained model) or `model_size` (the short form: that preset's newest trained
model). `base=True` generates with the model's base alone, for comparison.
Sampling: `temperature` 0 means greedy (the default, so answers are reproducible);
`top_k` 0 means no top-k cut.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from trainkit_core.errors import UsageError

#: The longest image data URL a request may carry (characters): 20 MiB of image in base64.
MAX_DATA_URL_CHARS = 28 * 1024 * 1024


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"]
    text: str


class ImageURL(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=MAX_DATA_URL_CHARS)
    detail: str | None = None  # OpenAI's; accepted and ignored (the processor decides the size)


class ImagePart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["image_url"]
    image_url: ImageURL


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str | list[Annotated[TextPart | ImagePart, Field(discriminator="type")]]


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
    images: list[Annotated[str, Field(max_length=MAX_DATA_URL_CHARS)]] | None = None
    #: True where the caller fetches or refuses http(s) image URLs itself, then validates again (the API).
    remote_images_resolved_later: ClassVar[bool] = False

    @model_validator(mode="after")
    def _one_input(self) -> GenerateRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt or messages")
        if self.messages is not None:
            if not self.messages:
                raise ValueError("messages is empty")
            if self.messages[-1].role != "user":
                raise ValueError("the last message must be the user's")
        if self.model_path is None and self.model_size is None:
            raise ValueError("give model_path (trained/<run id>) or model_size (a preset)")
        if self.model_path is not None and self.model_size is not None:
            raise ValueError("give model_path or model_size, not both")
        from trainkit_core.inference.request_images import check_request_images

        check_request_images(self.chat(), remote_ok=self.remote_images_resolved_later)
        return self

    def chat(self) -> list[dict[str, Any]]:
        """The conversation to format: `messages`, or `prompt` as one user turn; `images` join the last user turn."""
        if self.messages is not None:
            turns = [m.model_dump(exclude_none=True) for m in self.messages]
        else:
            turns = [{"role": "user", "content": self.prompt or ""}]
        if self.images:
            last = turns[-1]
            parts = (
                last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
            )
            parts = parts + [{"type": "image_url", "image_url": {"url": url}} for url in self.images]
            turns[-1] = {**last, "content": parts}
        return turns

    @property
    def has_images(self) -> bool:
        return any(isinstance(m["content"], list) for m in self.chat())

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
