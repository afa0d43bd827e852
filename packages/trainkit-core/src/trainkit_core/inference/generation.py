"""Generating with a loaded model: sampling, seed, stopping at the format's end of turn.

Generation stops at the chat format's end-of-turn token (or the tokenizer's EOS),
which is not part of the answer text. `stream_tokens` yields text pieces as the model
produces them. With `base=True` the adapter is switched off for the call, so the same
loaded weights answer as the base model. Imports torch and transformers inside
functions only.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from trainkit_core.inference.loading import LoadedModel
from trainkit_core.inference.request import GenerateRequest
from trainkit_core.models.chat_format import render_prompt


def answer_fields(loaded: LoadedModel, req: GenerateRequest, ids: list[int]) -> dict[str, Any]:
    """``text``, and where the model called tools or thought, ``tool_calls`` and ``reasoning_content``.

    Calls are read only when the request gave tools. A call that does not parse is
    answered as the model's plain text: a client gets what the model said, never a
    server error for what a model wrote.
    """
    import uuid

    from trainkit_core.models.tool_syntax import ToolSyntaxError, parse_answer

    tok = loaded.tokenizer
    plain = tok.decode(ids, skip_special_tokens=True)
    if not (req.tools or loaded.fmt.native_tools):
        return {"text": plain}
    raw = tok.decode(ids, skip_special_tokens=False)
    try:
        parsed = parse_answer(raw, loaded.fmt.name)
    except ToolSyntaxError:
        return {"text": plain}
    if not parsed["tool_calls"] and not parsed["reasoning_content"]:
        return {"text": plain}  # nothing to take apart: the answer exactly as decoded
    fields: dict[str, Any] = {"text": _without_special(tok, parsed["content"])}
    if parsed["reasoning_content"]:
        fields["reasoning_content"] = parsed["reasoning_content"]
    if req.tools and parsed["tool_calls"]:
        fields["tool_calls"] = [
            {"id": "call_" + uuid.uuid4().hex[:24], "type": "function", "function": call}
            for call in parsed["tool_calls"]
        ]
    elif parsed["tool_calls"]:
        return {"text": plain}  # calls nobody offered the model: its words, as they are
    return fields


def _without_special(tok: Any, text: str) -> str:
    return _drop_special(tok, text).strip()


def _drop_special(tok: Any, text: str) -> str:
    for token in tok.all_special_tokens:
        text = text.replace(token, "")
    return text


def split_thinking(raw: str) -> tuple[str, str]:
    """(the thinking so far, the rest) of a Gemma 4 answer still being written, decoded with its special tokens.

    The thought channel is ``<|channel>thought\n…<channel|>``; both markers are single
    tokens, so each arrives whole. Until the channel's name is complete, nothing of it is
    thinking yet; before it opens and after it closes is the answer.
    """
    from trainkit_core.models.tool_syntax import CHANNEL_CLOSE, CHANNEL_OPEN

    start = raw.find(CHANNEL_OPEN)
    if start < 0:
        return "", raw
    end = raw.find(CHANNEL_CLOSE, start)
    inner = raw[start + len(CHANNEL_OPEN) : end if end >= 0 else len(raw)]
    thinking = inner[len("thought") :].removeprefix("\n") if inner.startswith("thought") else ""
    return thinking, raw[:start] + (raw[end + len(CHANNEL_CLOSE) :] if end >= 0 else "")


def image_inputs(
    loaded: LoadedModel,
    turns: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    think: bool | None = None,
) -> Any:
    """The processor's inputs (ids, pixel values, token types) for a conversation with images.

    The prompt is the text path's (`render_prompt`: tools, thinking), with the processor's
    image placeholder where each picture is.
    """
    from trainkit_core.datasets.vision_collator import (
        Rendered,
        audio_placeholder,
        image_placeholder,
        processor_inputs,
        with_placeholders,
    )
    from trainkit_core.errors import UsageError

    if loaded.processor is None:
        raise UsageError(
            f"{loaded.ref.path} (base {loaded.card.base_model}) is a text-only model: it takes no images or audio"
        )
    flat, images, audio = with_placeholders(
        turns, image_placeholder(loaded.processor), audio_placeholder(loaded.processor)
    )
    text = render_prompt(flat, loaded.fmt, tools=tools, think=think)
    batch = processor_inputs(loaded.processor, [Rendered(text, images, [], audio)])
    return {k: v.to(loaded.device) for k, v in batch.items()}


def context_length(model: Any) -> int | None:
    """How many positions the model reads (its text config's ``max_position_embeddings``); None when unknown."""
    config: Any = getattr(model, "config", None)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for candidate in (text_config, config):
        value = getattr(candidate, "max_position_embeddings", None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def check_context(loaded: LoadedModel, prompt_tokens: int, max_new_tokens: int) -> None:
    """`InputTooLargeError` when the prompt and the answer asked for do not fit the model's context.

    Checked on the token ids, before the model runs: a prompt past the context would
    otherwise allocate its attention (gigabytes for tens of thousands of tokens) and fail
    inside torch, or answer from positions the model never learned.
    """
    from trainkit_core.errors import InputTooLargeError

    context = context_length(loaded.model)
    if context is None or prompt_tokens + max_new_tokens <= context:
        return
    raise InputTooLargeError(
        f"the prompt is {prompt_tokens} tokens and max_new_tokens {max_new_tokens}: together over the "
        f"context of {context} tokens of {loaded.card.base_model} (its max_position_embeddings)",
        hint="shorten the prompt (or the conversation), or ask for fewer new tokens",
    )


def _sampling(req: GenerateRequest) -> dict[str, Any]:
    if req.temperature <= 0:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": req.temperature, "top_p": req.top_p, "top_k": req.top_k}


def _adapter_context(loaded: LoadedModel, base: bool) -> Any:
    model = loaded.model
    if base:
        return model.disable_adapter()
    model.set_adapter(loaded.adapter)
    return contextlib.nullcontext()


class AnswerPieces:
    """A generation streamer: decodes the growing answer and hands on each new piece, thinking apart.

    transformers calls `put` with the prompt first (skipped), then each new token, and `end`.
    `thinks` (Gemma 4) splits the thought channel off the answer (`split_thinking`):
    `on_text(piece, "thinking")` for it, `on_text(piece, "token")` for the answer. A piece
    ending in half a character waits for the rest.
    """

    def __init__(self, tok: Any, stops: list[int], thinks: bool, on_text: Callable[[str, str], None]) -> None:
        self.tok, self.stops, self.thinks, self.on_text = tok, set(stops), thinks, on_text
        self.ids: list[int] = []
        self.sent = {"token": 0, "thinking": 0}
        self.first = True

    def _parts(self) -> dict[str, str]:
        if not self.thinks:
            return {"token": self.tok.decode(self.ids, skip_special_tokens=True)}
        thinking, rest = split_thinking(self.tok.decode(self.ids, skip_special_tokens=False))
        return {"thinking": _drop_special(self.tok, thinking), "token": _drop_special(self.tok, rest)}

    def _hand_on(self, final: bool) -> None:
        for kind, text in self._parts().items():
            if len(text) > self.sent[kind] and (final or not text.endswith("\ufffd")):
                self.on_text(text[self.sent[kind] :], kind)
                self.sent[kind] = len(text)

    def put(self, value: Any) -> None:
        if self.first:  # the prompt
            self.first = False
            return
        self.ids.extend(int(i) for i in value.reshape(-1).tolist() if int(i) not in self.stops)
        self._hand_on(final=False)

    def end(self) -> None:
        self._hand_on(final=True)


def generate(
    loaded: LoadedModel,
    req: GenerateRequest,
    *,
    on_text: Callable[[str, str], None] | None = None,
) -> dict[str, Any]:
    """Generate one answer; `on_text(piece, kind)` gets each new piece as it is produced.

    `kind` is ``"token"`` for the answer and ``"thinking"`` for a Gemma 4 model's thought
    channel, which is never sent as answer text.
    """
    import torch

    tok = loaded.tokenizer
    if req.has_images:
        inputs = image_inputs(loaded, req.chat(), tools=req.tool_list(), think=req.think)
    else:
        prompt = render_prompt(req.chat(), loaded.fmt, tools=req.tool_list(), think=req.think)
        inputs = tok(prompt, add_special_tokens=False, return_tensors="pt").to(loaded.device)
    prompt_len = int(inputs["input_ids"].shape[1])
    check_context(loaded, prompt_len, req.max_new_tokens)
    stops = loaded.fmt.stop_ids(tok)

    started = time.perf_counter()
    with loaded.lock, torch.inference_mode():
        if req.seed is not None:
            torch.manual_seed(req.seed)
        with _adapter_context(loaded, req.base):
            output = loaded.model.generate(
                **inputs,
                max_new_tokens=req.max_new_tokens,
                eos_token_id=stops,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else stops[0],
                streamer=AnswerPieces(tok, stops, loaded.fmt.native_tools, on_text) if on_text is not None else None,
                **_sampling(req),
            )
    new = [int(i) for i in output[0, prompt_len:].tolist()]
    stopped = bool(new) and new[-1] in stops
    answer = new[:-1] if stopped else new
    return {
        "model_path": loaded.ref.path,
        "run_id": loaded.ref.run_id,
        "base": req.base,
        "base_model": loaded.card.base_model,
        "chat_format": loaded.fmt.name,
        **(fields := answer_fields(loaded, req, answer)),
        "finish_reason": "tool_calls" if "tool_calls" in fields else "stop" if stopped else "length",
        "usage": {"prompt_tokens": prompt_len, "completion_tokens": len(new)},
        "timings": {"load_s": round(loaded.load_s, 4), "generate_s": round(time.perf_counter() - started, 4)},
        "cached": loaded.cached,
    }


def stream_tokens(loaded: LoadedModel, req: GenerateRequest) -> Iterator[dict[str, Any]]:
    """Yield ``{"type": "token", "text"}`` as the model produces them, then ``{"type": "done", …}``.

    A Gemma 4 model's thinking comes as ``{"type": "thinking", "text"}`` events, apart from the answer.
    """
    import queue

    pieces: queue.Queue[tuple[str, Any]] = queue.Queue()

    def work() -> None:
        try:
            result = generate(loaded, req, on_text=lambda text, kind: pieces.put((kind, text)))
            pieces.put(("done", result))
        except BaseException as exc:
            pieces.put(("error", exc))

    thread = threading.Thread(target=work, name="trainkit-generate", daemon=True)
    thread.start()
    while True:
        kind, value = pieces.get()
        if kind in ("token", "thinking"):
            yield {"type": kind, "text": value}
        elif kind == "done":
            yield {"type": "done", **value}
            break
        else:
            raise value
    thread.join()
