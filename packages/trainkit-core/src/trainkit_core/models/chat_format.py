"""The Gemma chat formats, shared by training and inference so that both see the same text.

Gemma 3::

    <bos><start_of_turn>user\\n{user}<end_of_turn>\\n<start_of_turn>model\\n{answer}<end_of_turn>\\n

Gemma 4::

    <bos><|turn>user\\n{user}<turn|>\\n<|turn>model\\n{answer}<turn|>\\n

Gemma 3 has no system role. Both formats fold a system message into the first user
turn as ``system + "\\n\\n" + user`` (the rule of Gemma 3's official template and of
Unsloth), so a model trained here sees the same text whichever format it uses. Message
contents are stripped of surrounding whitespace, as the official templates do.

Training masks the loss to the assistant's turns: the answer text, its end-of-turn
token and the newline after it are trained; everything of the prompt is not, nor an
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

    def start(self, role: str) -> str:
        return f"{self.turn_start}{self.model_role if role == 'assistant' else role}\n"

    @property
    def special_tokens(self) -> tuple[str, str]:
        return (self.turn_start, self.end_of_turn)

    @property
    def generation_prompt(self) -> str:
        return self.start("assistant")

    @property
    def chat_template(self) -> str:
        """A Jinja chat template rendering exactly `render`, with `{% generation %}` markers.

        The markers let `apply_chat_template(..., return_assistant_tokens_mask=True)` and
        trl's `assistant_only_loss` find the assistant's tokens too.
        """
        ts, eot = self.turn_start, self.end_of_turn
        return (
            "{{ bos_token }}"
            "{%- if messages[0]['role'] == 'system' -%}"
            "{%- set first_user_prefix = messages[0]['content'] | trim + '\n\n' -%}"
            "{%- set loop_messages = messages[1:] -%}"
            "{%- else -%}"
            "{%- set first_user_prefix = '' -%}"
            "{%- set loop_messages = messages -%}"
            "{%- endif -%}"
            "{%- for message in loop_messages -%}"
            "{%- if message['role'] == 'assistant' and message.get('weight', 1) != 0 -%}"
            f"{{{{ '{ts}{self.model_role}\n' }}}}"
            "{% generation %}"
            f"{{{{ message['content'] | trim }}}}{{{{ '{eot}\n' }}}}"
            "{% endgeneration %}"
            "{%- elif message['role'] == 'assistant' -%}"
            f"{{{{ '{ts}{self.model_role}\n' + message['content'] | trim + '{eot}\n' }}}}"
            "{%- else -%}"
            f"{{{{ '{ts}' + message['role'] + '\n' + (first_user_prefix if loop.first else '') "
            f"+ message['content'] | trim + '{eot}\n' }}}}"
            "{%- endif -%}"
            "{%- endfor -%}"
            "{%- if add_generation_prompt -%}"
            f"{{{{ '{ts}{self.model_role}\n' }}}}"
            "{%- endif -%}"
        )


GEMMA3 = ChatFormat(name="gemma3", bos="<bos>", turn_start="<start_of_turn>", end_of_turn="<end_of_turn>")
GEMMA4 = ChatFormat(name="gemma4", bos="<bos>", turn_start="<|turn>", end_of_turn="<turn|>")
FORMATS: dict[str, ChatFormat] = {f.name: f for f in (GEMMA3, GEMMA4)}


def control_texts() -> tuple[str, ...]:
    """Text that means structure to some chat format (turn markers, BOS, EOS, Gemma 4's thought channel).

    Inside an example's content it would be tokenised as the marker itself, letting
    the example open and close turns of its own, so validation refuses it.
    """
    found = {text for f in FORMATS.values() for text in (f.bos, f.turn_start, f.end_of_turn)}
    return tuple(sorted(found | {"<eos>", "<|channel>", "<channel|>"}))


def get_format(name: str) -> ChatFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown chat format {name!r}; known: {', '.join(FORMATS)}") from None


def fold_system(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """User/assistant turns only: a leading system message joins the first user turn.

    An assistant turn keeps its ``weight`` (0: not trained). `UsageError` when a system
    message is not first, a role is unknown, or a system message is not followed by a
    user turn.
    """
    turns: list[dict[str, Any]] = [
        {"role": str(m.get("role")), "content": str(m.get("content", "")).strip()}
        | ({"weight": m["weight"]} if "weight" in m else {})
        for m in messages
    ]
    for i, turn in enumerate(turns):
        if turn["role"] not in ROLES:
            raise UsageError(f"message {i}: unknown role {turn['role']!r}; expected one of {', '.join(ROLES)}")
        if turn["role"] == "system" and i != 0:
            raise UsageError(f"message {i}: a system message may only come first")
    if turns and turns[0]["role"] == "system":
        system = turns.pop(0)["content"]
        if not turns or turns[0]["role"] != "user":
            raise UsageError("a system message must be followed by a user message")
        turns[0] = {"role": "user", "content": f"{system}\n\n{turns[0]['content']}"}
    return turns


def segments(
    messages: Sequence[Mapping[str, Any]], fmt: ChatFormat, *, add_generation_prompt: bool = False
) -> list[tuple[str, bool]]:
    """The rendered conversation as (text, trained) pieces, in order."""
    pieces: list[tuple[str, bool]] = [(fmt.bos, False)]
    for turn in fold_system(messages):
        pieces.append((fmt.start(turn["role"]), False))
        trained = is_trained(turn)
        pieces.append((turn["content"] + fmt.end_of_turn + "\n", trained))
    if add_generation_prompt:
        pieces.append((fmt.generation_prompt, False))
    return pieces


def is_trained(message: Mapping[str, Any]) -> bool:
    """Whether training learns this message: an assistant's, unless its weight is 0."""
    return message.get("role") == "assistant" and message.get("weight", 1) != 0


def render(messages: Sequence[Mapping[str, Any]], fmt: ChatFormat, *, add_generation_prompt: bool = False) -> str:
    """The conversation as the model sees it."""
    return "".join(text for text, _ in segments(messages, fmt, add_generation_prompt=add_generation_prompt))


def render_prompt(messages: Sequence[Mapping[str, Any]], fmt: ChatFormat) -> str:
    """What inference feeds the model: the conversation so far and the model's turn start.

    A trailing assistant message (e.g. an eval example's reference answer) is dropped.
    """
    turns = list(messages)
    if turns and turns[-1].get("role") == "assistant":
        turns = turns[:-1]
    return render(turns, fmt, add_generation_prompt=True)


def encode_for_training(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], fmt: ChatFormat, *, max_length: int | None = None
) -> dict[str, list[int]]:
    """`input_ids`, `attention_mask` and `labels` (-100 outside the assistant's turns).

    The whole conversation is tokenized at once (as inference does); a token is trained
    when it starts inside an assistant piece. Needs a fast tokenizer (offsets).
    """
    pieces = segments(messages, fmt)
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
