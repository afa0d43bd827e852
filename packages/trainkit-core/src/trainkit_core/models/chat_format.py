"""The Gemma chat formats, shared by training and inference so that both see the same text.

Gemma 3::

    <bos><start_of_turn>user\\n{user}<end_of_turn>\\n<start_of_turn>model\\n{answer}<end_of_turn>\\n

Gemma 4::

    <bos><|turn>user\\n{user}<turn|>\\n<|turn>model\\n{answer}<turn|>\\n

Gemma 3 has no system role. Both formats fold a system message into the first user
turn as ``system + "\\n\\n" + user`` (the rule of Gemma 3's official template and of
Unsloth), so a model trained here sees the same text whichever format it uses. Message
contents are stripped of surrounding whitespace, as the official templates do.

Tools, tool calls, tool answers and thinking are written as each format has them
(`trainkit_core.models.tool_syntax`). Gemma 4 keeps a call's answers inside the model's
turn: the model ends its calls with ``<|tool_response>`` (trained: it is how the model
hands over to the caller, and where generation stops), the answers follow (not
trained), and the model's next message goes on in the same turn. Gemma 3 closes the
turn after its fenced calls, and the answers come back as a user turn.

Training masks the loss to the assistant's turns: the answer text (its thinking and
calls too), its end-of-turn token and the newline after it are trained; everything of the prompt is not, nor an
assistant message of ``"weight": 0`` (OpenAI's per-message weight: context only). The
mask is computed from character offsets on the whole rendered conversation, so the
tokens are exactly those inference sees. `check_loss_mask` proves this on the real
tokenizer before a run trains (a model that never learns to stop, because its
end-of-turn token fell outside the mask, is a known failure: axolotl #3754).

No heavy imports: tokenizers are passed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainkit_core.errors import JobError, UsageError

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ChatFormat:
    """The markers of one chat format."""

    name: str
    bos: str
    turn_start: str  # followed by the role name and a newline
    end_of_turn: str  # also the token generation stops at
    model_role: str = "model"
    #: Tokens of its own for tools and a thought channel (Gemma 4); else the prompt convention.
    native_tools: bool = False

    def start(self, role: str) -> str:
        return f"{self.turn_start}{self.model_role if role == 'assistant' else role}\n"

    @property
    def special_tokens(self) -> tuple[str, str]:
        return (self.turn_start, self.end_of_turn)

    def stop_ids(self, tokenizer: Any) -> list[int]:
        """Where generation stops: the end of the turn, Gemma 4's hand-over of a call (where the
        tokenizer has that token), and the tokenizer's EOS. One list for inference, evals and samples."""
        from trainkit_core.models.tool_syntax import RESPONSE_OPEN

        texts = (self.end_of_turn, RESPONSE_OPEN) if self.native_tools else (self.end_of_turn,)
        ids = [tokenizer.convert_tokens_to_ids(text) for text in texts]
        ids = [i for i in ids if i is not None and i != tokenizer.unk_token_id]
        if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
            ids.append(tokenizer.eos_token_id)
        return ids

    @property
    def generation_prompt(self) -> str:
        return self.start("assistant")

    @property
    def chat_template(self) -> str:
        """A Jinja chat template rendering exactly `render`, with `{% generation %}` markers.

        The markers let `apply_chat_template(..., return_assistant_tokens_mask=True)` and
        trl's `assistant_only_loss` find the assistant's tokens too
        (`trainkit_core.models.chat_template`).
        """
        from trainkit_core.models.chat_template import chat_template

        return chat_template(self)


GEMMA3 = ChatFormat(name="gemma3", bos="<bos>", turn_start="<start_of_turn>", end_of_turn="<end_of_turn>")
GEMMA4 = ChatFormat(name="gemma4", bos="<bos>", turn_start="<|turn>", end_of_turn="<turn|>", native_tools=True)
FORMATS: dict[str, ChatFormat] = {f.name: f for f in (GEMMA3, GEMMA4)}


def control_texts() -> tuple[str, ...]:
    """Text that means structure to some chat format (turn markers, BOS, EOS, Gemma 4's thought channel).

    Inside an example's content it would be tokenised as the marker itself, letting
    the example open and close turns of its own, so validation refuses it.
    """
    from trainkit_core.models.tool_syntax import GEMMA4_THINKING_TOKENS, GEMMA4_TOKENS

    found = {text for f in FORMATS.values() for text in (f.bos, f.turn_start, f.end_of_turn)}
    return tuple(sorted(found | {"<eos>", *GEMMA4_TOKENS, *GEMMA4_THINKING_TOKENS}))


def get_format(name: str) -> ChatFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown chat format {name!r}; known: {', '.join(FORMATS)}") from None


def _checked(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as plain dicts, content stripped; `UsageError` for an unknown role or a late system message."""
    turns: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        turn = dict(m)
        turn["role"] = str(m.get("role"))
        turn["content"] = str(m.get("content") or "").strip()
        if turn["role"] not in (*ROLES, "tool"):
            raise UsageError(f"message {i}: unknown role {turn['role']!r}; expected one of {', '.join(ROLES)}, tool")
        if turn["role"] == "system" and i != 0:
            raise UsageError(f"message {i}: a system message may only come first")
        turns.append(turn)
    return turns


def has_thinking(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(m.get("reasoning_content") for m in messages)


def segments(
    messages: Sequence[Mapping[str, Any]],
    fmt: ChatFormat,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    keep_thinking: bool = True,
    think: bool | None = None,
) -> list[tuple[str, bool]]:
    """The rendered conversation as (text, trained) pieces, in order.

    `tools`: the functions the model may call (OpenAI's definitions). Thinking is on
    for Gemma 4 when `think` says so, else when the conversation has reasoning and
    `keep_thinking` is true; with `keep_thinking` false every message's reasoning is
    dropped (a model trained to answer directly). A Gemma 4 conversation with tools or
    thinking opens a system turn of its own (declarations and the ``<|think|>`` switch
    belong there); one without keeps the system text folded into the first user turn.
    """
    from trainkit_core.models import tool_syntax as ts

    turns = _checked(messages)
    system = turns.pop(0)["content"] if turns and turns[0]["role"] == "system" else ""
    if turns and turns[0]["role"] != "user" and system:
        raise UsageError("a system message must be followed by a user message")
    native = fmt.native_tools
    reasoned = keep_thinking and has_thinking(turns)
    if reasoned and not native:
        raise UsageError(
            f"the conversation has thinking (reasoning_content), which the {fmt.name} chat format has no place for",
            hint="train a Gemma 4 model, or drop the thinking (keep_thinking = false)",
        )
    thinking = bool(native and (think if think is not None else reasoned))
    pieces: list[tuple[str, bool]] = [(fmt.bos, False)]
    prefix = ""
    if native and (tools or thinking):
        body = (ts.THINK if thinking else "") + system + (ts.gemma4_declarations(tools) if tools else "")
        pieces.append((fmt.start("system") + body + fmt.end_of_turn + "\n", False))
    else:
        parts = [p for p in (system, ts.gemma3_tools_prompt(tools) if tools else "") if p]
        prefix = "".join(p + "\n\n" for p in parts)
    names: dict[str, str] = {}
    in_model_turn = False  # Gemma 4: a turn goes on after the tools' answers
    previous = ""
    for turn in turns:
        role, content = turn["role"], turn["content"]
        if role == "user":
            pieces.append((fmt.start("user") + prefix + content + fmt.end_of_turn + "\n", False))
            prefix = ""
        elif role == "assistant":
            if not in_model_turn:
                pieces.append((fmt.start("assistant"), False))
            calls = turn.get("tool_calls") or []
            for call in calls:
                names[str(call.get("id"))] = str(ts.function_of(call)["name"])
            reasoning = turn.get("reasoning_content") if thinking and keep_thinking else None
            body = ts.gemma4_thought(reasoning) if reasoning else ""
            if calls and native:
                body += content + ts.gemma4_calls(calls) + ts.RESPONSE_OPEN
            elif calls:
                body += content + ("\n" if content else "") + ts.gemma3_calls(calls) + fmt.end_of_turn + "\n"
            else:
                body += content + fmt.end_of_turn + "\n"
            in_model_turn = bool(calls and native)
            pieces.append((body, is_trained(turn)))
        else:  # a tool's answer
            call_id = str(turn.get("tool_call_id"))
            if call_id not in names:
                raise UsageError(f"a tool message answers {call_id!r}, which no earlier assistant message called")
            if native:
                opener = "" if previous == "assistant" else ts.RESPONSE_OPEN
                pieces.append((opener + ts.gemma4_response(names[call_id], content), False))
            else:
                answer = ts.gemma3_response(names[call_id], content)
                if previous == "tool":  # answers to one turn's calls share a user turn
                    text, _ = pieces.pop()
                    pieces.append(
                        (text.removesuffix(fmt.end_of_turn + "\n") + "\n" + answer + fmt.end_of_turn + "\n", False)
                    )
                else:
                    pieces.append((fmt.start("user") + answer + fmt.end_of_turn + "\n", False))
        previous = role
    if add_generation_prompt and not in_model_turn:
        pieces.append((fmt.generation_prompt, False))
    return pieces


def is_trained(message: Mapping[str, Any]) -> bool:
    """Whether training learns this message: an assistant's, unless its weight is 0."""
    return message.get("role") == "assistant" and message.get("weight", 1) != 0


def render(
    messages: Sequence[Mapping[str, Any]],
    fmt: ChatFormat,
    *,
    add_generation_prompt: bool = False,
    tools: Sequence[Mapping[str, Any]] | None = None,
    keep_thinking: bool = True,
) -> str:
    """The conversation as the model sees it."""
    pieces = segments(
        messages, fmt, add_generation_prompt=add_generation_prompt, tools=tools, keep_thinking=keep_thinking
    )
    return "".join(text for text, _ in pieces)


def render_prompt(
    messages: Sequence[Mapping[str, Any]],
    fmt: ChatFormat,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    think: bool | None = None,
) -> str:
    """What inference feeds the model: the conversation so far and the model's turn start.

    A trailing assistant message (e.g. an eval example's reference answer) is dropped.
    Reasoning of earlier turns is not shown again (as Gemma 4's own template does); with
    `think` the model is asked to think (Gemma 4).
    """
    turns = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]
    if turns and turns[-1].get("role") == "assistant":
        turns = turns[:-1]
    pieces = segments(turns, fmt, add_generation_prompt=True, tools=tools, think=think)
    return "".join(text for text, _ in pieces)


def encode_for_training(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    fmt: ChatFormat,
    *,
    max_length: int | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    keep_thinking: bool = True,
) -> dict[str, list[int]]:
    """`input_ids`, `attention_mask` and `labels` (-100 outside the assistant's turns).

    The whole conversation is tokenized at once (as inference does); a token is trained
    when it starts inside an assistant piece. Needs a fast tokenizer (offsets).
    """
    return encode_pieces(tokenizer, segments(messages, fmt, tools=tools, keep_thinking=keep_thinking), max_length)


def encode_pieces(
    tokenizer: Any, pieces: Sequence[tuple[str, bool]], max_length: int | None = None
) -> dict[str, list[int]]:
    """`encode_for_training` of pieces already rendered (`segments`; the vision collator's carry image placeholders)."""
    text = "".join(t for t, _ in pieces)
    spans = []
    pos = 0
    for piece, trained in pieces:
        if trained:
            spans.append((pos, pos + len(piece)))
        pos += len(piece)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    labels = []
    for token_id, (start, end) in zip(ids, encoded["offset_mapping"], strict=True):
        inside = any(a <= start < b for a, b in spans) and end > start
        labels.append(token_id if inside else -100)
    if max_length is not None:
        ids, labels = ids[:max_length], labels[:max_length]
    return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels}


def render_example(record: Mapping[str, Any], fmt: ChatFormat, *, keep_thinking: bool = True) -> str:
    """One dataset record (`Example.as_record`: messages, and tools when it has some) as the model sees it."""
    return render(record["messages"], fmt, tools=record.get("tools"), keep_thinking=keep_thinking)


def encode_example(
    tokenizer: Any,
    record: Mapping[str, Any],
    fmt: ChatFormat,
    *,
    max_length: int | None = None,
    keep_thinking: bool = True,
) -> dict[str, list[int]]:
    """`encode_for_training` of one dataset record, its tools included."""
    return encode_for_training(
        tokenizer,
        record["messages"],
        fmt,
        max_length=max_length,
        tools=record.get("tools"),
        keep_thinking=keep_thinking,
    )


PROBE = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "Say hello to the cat."},
    {"role": "assistant", "content": "Hello cat!"},
    {"role": "user", "content": "And the dog?"},
    {"role": "assistant", "content": "Hello dog."},
]


def check_loss_mask(tokenizer: Any, fmt: ChatFormat, messages: Sequence[Mapping[str, Any]] = PROBE) -> dict[str, Any]:
    """Prove on this tokenizer that the loss covers each answer and its end-of-turn, and no prompt.

    Raises `JobError` saying what is wrong; returns a summary for the run's events.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise JobError(f"the tokenizer {type(tokenizer).__name__} is not a fast tokenizer; the loss mask needs offsets")
    eot_id = tokenizer.convert_tokens_to_ids(fmt.end_of_turn)
    if eot_id is None or eot_id == tokenizer.unk_token_id:
        raise JobError(f"the tokenizer has no {fmt.end_of_turn!r} token: it does not speak the {fmt.name} format")
    encoded = encode_for_training(tokenizer, messages, fmt)
    answers = [m["content"].strip() for m in messages if is_trained(m)]
    trained = [i for i in encoded["labels"] if i != -100]
    text = tokenizer.decode(trained, skip_special_tokens=False)
    expected = "".join(a + fmt.end_of_turn + "\n" for a in answers)
    if trained.count(eot_id) != len(answers):
        raise JobError(
            f"loss mask check failed ({fmt.name}): {trained.count(eot_id)} of {len(answers)} "
            f"end-of-turn tokens are trained; the model would not learn to stop"
        )
    if " ".join(text.split()) != " ".join(expected.split()):
        raise JobError(
            f"loss mask check failed ({fmt.name}): the trained tokens decode to {text!r}, expected {expected!r}"
        )
    return {"chat_format": fmt.name, "trained_tokens": len(trained), "total_tokens": len(encoded["input_ids"])}
