"""Reading JSONL examples: line by line, every problem kept with its line.

One parser serves the validator and the job-side reader, so what validation accepts
is exactly what training reads. Each accepted example is normalised to
``{"messages": [{"role", "content"}, ...]}``: a prompt/completion pair becomes a user
turn and an assistant turn. Keys the format does not define (in an example or in a
message) are reported as `unknown-key` warnings at their line and dropped (an error
under ``--strict``). Each line must be strict JSON (`trainkit_core.datasets.strict_json`: no
NaN, no duplicate keys, no lone surrogates) and at most `MAX_LINE_BYTES` long.
A system message stays in the
list (first only); the Gemma turn format folds it into the first user turn later
(`trainkit_core.models.chat_format`), as ``system + "\\n\\n" + user``.

An assistant message may carry OpenAI's ``"weight"``: 0 keeps it in the conversation
as context but out of the loss, 1 (the default) trains it. An example whose every
assistant message has weight 0 is refused: it would train nothing.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from trainkit_core.datasets.images import as_openai, image_urls, parse_content, text_of
from trainkit_core.datasets.problems import Problem
from trainkit_core.datasets.strict_json import StrictJSONError, loads

ROLES = ("system", "user", "assistant")
BOM = b"\xef\xbb\xbf"
#: The longest line accepted (bytes): far above any example a model can train on.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: Problems reported one by one per file; the rest are counted.
MAX_PROBLEMS_PER_FILE = 100
#: The keys each format defines; any other key is reported (`unknown-key`).
EXAMPLE_KEYS = {
    "chat": ("messages",),
    "prompt_completion": ("prompt", "completion"),
    "preference": ("input", "preferred_output", "non_preferred_output"),
}
#: Keys of an OpenAI preference line's `input` besides `messages` (accepted, not used).
PREFERENCE_INPUT_KEYS = ("messages", "tools", "parallel_tool_calls")
MESSAGE_KEYS = ("role", "content", "weight")
#: The weights an assistant message may have (OpenAI's: train on it, or not).
WEIGHTS = (0, 1)


@dataclass(frozen=True)
class Example:
    """One accepted example and where it came from."""

    file: str
    line: int
    #: (role, content), hashable for duplicate checks; a content with images is a
    #: tuple of parts (`trainkit_core.datasets.images`).
    messages: tuple[tuple[str, Any], ...]
    #: Preference pairs: the prompt is `messages` (ending with the user), these the two answers.
    chosen: str | None = None
    rejected: str | None = None
    #: Prompt data: the line's other fields (what graders read), as sorted (key, JSON text) pairs.
    fields: tuple[tuple[str, str], ...] = ()
    #: Indices into `messages` of the assistant messages with weight 0 (context, not trained).
    untrained: tuple[int, ...] = ()

    def as_record(self) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [
            {"role": role, "content": as_openai(content)} for role, content in self.messages
        ]
        for index in self.untrained:
            messages[index]["weight"] = 0
        record: dict[str, Any] = {"messages": messages}
        if self.chosen is not None:
            record["chosen"], record["rejected"] = self.chosen, self.rejected
        for key, text in self.fields:
            record[key] = json.loads(text)
        return record

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two examples the same (duplicates, train/eval overlap)."""
        return (self.messages, self.chosen, self.rejected, self.fields, self.untrained)

    @property
    def image_urls(self) -> list[str]:
        return [url for _, content in self.messages for url in image_urls(content)]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def chars(self) -> int:
        return (
            sum(len(text_of(content)) for _, content in self.messages)
            + len(self.chosen or "")
            + len(self.rejected or "")
        )


def parse_jsonl(
    data: bytes, file: str, fmt: str, *, allow_chat_markers: bool = False
) -> tuple[list[Example], list[Problem]]:
    """Every example of one JSONL file, and its problems with their lines.

    Blank lines are skipped. A bad line is reported and left out; parsing goes on, so
    one run of the validator names the problems of a file: the first
    `MAX_PROBLEMS_PER_FILE` of them, then one more that counts the rest (a file of a
    million bad lines once printed, and held, a million problems).
    """
    examples: list[Example] = []
    problems: list[Problem] = []
    hidden = {"error": 0, "warning": 0}
    if data.startswith(BOM):
        problems.append(
            Problem(
                file, 1, "error", "bom", "file starts with a UTF-8 byte order mark (BOM); save it as UTF-8 without BOM"
            )
        )
        data = data[len(BOM) :]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        example, found = _parse_line(raw.removesuffix(b"\r"), file, number, fmt, allow_chat_markers)
        if example is not None:
            examples.append(example)
        for problem in found:
            if len(problems) < MAX_PROBLEMS_PER_FILE:
                problems.append(problem)
            else:
                hidden[problem.severity] += 1
    if hidden["error"] or hidden["warning"]:
        problems.append(
            Problem(
                file,
                None,
                "error" if hidden["error"] else "warning",
                "more-problems",
                f"{hidden['error']} more error(s) and {hidden['warning']} more warning(s) in this file "
                f"(the first {MAX_PROBLEMS_PER_FILE} are shown)",
            )
        )
    return examples, problems


def _parse_line(
    raw: bytes, file: str, number: int, fmt: str, allow_chat_markers: bool
) -> tuple[Example | None, list[Problem]]:
    """One line: its example when it is a good one, and its problems."""

    def problem(code: str, message: str) -> list[Problem]:
        return [Problem(file, number, "error", code, message)]

    if len(raw) > MAX_LINE_BYTES:
        return None, problem("line-too-large", f"line of {len(raw)} bytes is over the limit of {MAX_LINE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, problem("not-utf8", f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}")
    if text.startswith("\ufeff"):
        return None, problem(
            "bom", "line starts with a byte order mark (U+FEFF), as when files are joined together; remove it"
        )
    if not text.strip():
        return None, []
    try:
        record = loads(text)
    except StrictJSONError as exc:
        return None, problem("invalid-json", f"invalid JSON: {exc}")
    if not isinstance(record, dict):
        return None, problem("not-object", f"each line must be a JSON object, got {_kind(record)}")
    if fmt in LINE_PARSERS:
        example, found = LINE_PARSERS[fmt](record, file, number)
        if example is None or any(p.severity == "error" for p in found):
            return None, found
        if not allow_chat_markers:
            answers = tuple(("assistant", text) for text in (example.chosen, example.rejected) if text is not None)
            markers = _chat_markers(example.messages + answers, file, number)
            if markers:
                return None, [*found, *markers]
        return example, found
    if fmt == "chat":
        parsed, found = _chat(record, file, number)
    else:
        messages, found = _prompt_completion(record, file, number)
        parsed = Example(file, number, messages) if messages is not None else None
    if parsed is not None and not found and not allow_chat_markers:
        found = _chat_markers(parsed.messages, file, number)
    keep = parsed is not None and not found
    found = [*found, *_unknown_keys(record, fmt, file, number)]
    return (parsed if keep else None), found


def _chat_markers(messages: tuple[tuple[str, Any], ...], file: str, line: int) -> list[Problem]:
    """Text of a chat format's turn markers inside content: it would let one example write turns of its own."""
    from trainkit_core.models.chat_format import control_texts

    for index, (role, content) in enumerate(messages):
        for marker in control_texts():
            if marker in text_of(content):
                return [
                    Problem(
                        file,
                        line,
                        "error",
                        "chat-marker",
                        f"messages[{index}] ({role}) content holds the chat marker {marker!r}, which would let this "
                        "example write turns of its own; remove it, or set allow_chat_markers = true in dataset.toml",
                    )
                ]
    return []


def _unknown_keys(record: dict[str, Any], fmt: str, file: str, line: int) -> list[Problem]:
    """A warning for each key the format does not define, in the example and in its messages.

    OpenAI's fine-tuning validator rejects unrecognised keys; trainkit drops them, but
    says so: a misspelt key (``"contnet"``) would otherwise vanish without a word.
    """
    expected = EXAMPLE_KEYS.get(fmt, ())
    found = []
    for key in record:
        if key not in expected:
            found.append((key, f"the {fmt} format has {', '.join(expected)}"))
    messages = record.get("messages") if fmt == "chat" else None
    if isinstance(messages, list):
        for index, message in enumerate(messages):
            if isinstance(message, dict):
                for key in message:
                    if key not in MESSAGE_KEYS:
                        found.append((f"messages[{index}].{key}", "a message has role, content and weight"))
    return [
        Problem(file, line, "warning", "unknown-key", f"unknown key {_quoted(key)} ({why}); it is ignored")
        for key, why in found
    ]


def _quoted(key: str) -> str:
    return repr(key if len(key) <= 60 else key[:60] + "…")


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _chat(record: dict[str, Any], file: str, line: int) -> tuple[Example | None, list[Problem]]:
    def problem(code: str, message: str) -> Problem:
        return Problem(file, line, "error", code, message)

    if "messages" not in record:
        hint = ' (this is a prompt/completion pair; set format = "prompt_completion")' if "prompt" in record else ""
        return None, [problem("messages-missing", f'no "messages" key{hint}')]
    messages = record["messages"]
    if not isinstance(messages, list):
        return None, [problem("messages-not-list", f'"messages" must be an array, got {_kind(messages)}')]
    if not messages:
        return None, [problem("messages-empty", '"messages" is empty')]
    problems: list[Problem] = []
    turns: list[tuple[str, Any]] = []
    untrained: list[int] = []
    for index, message in enumerate(messages):
        at = f"messages[{index}]"
        if not isinstance(message, dict):
            problems.append(problem("message-not-object", f"{at} must be an object, got {_kind(message)}"))
            continue
        if "weight" in message:
            weighed = _weight(message, at, problem)
            if isinstance(weighed, Problem):
                problems.append(weighed)
            elif weighed == 0:
                untrained.append(len(turns))
        role = message.get("role")
        if role is None:
            problems.append(problem("role-missing", f'{at} has no "role"'))
            continue
        if role not in ROLES:
            hint = ' (write Gemma\'s "model" role as "assistant")' if role == "model" else ""
            problems.append(
                problem("role-unknown", f"{at} has unknown role {role!r}; expected system, user or assistant{hint}")
            )
            continue
        if "content" not in message:
            problems.append(problem("content-missing", f'{at} ({role}) has no "content"'))
            continue
        content = message["content"]
        if isinstance(content, list):
            parts, part_problems = parse_content(content, at, role, problem)
            problems.extend(part_problems)
            if parts is not None:
                turns.append((role, parts))
            continue
        if not isinstance(content, str):
            problems.append(
                problem(
                    "content-not-string",
                    f"{at} ({role}) content must be a string or a list of parts, got {_kind(content)}",
                )
            )
            continue
        if not content.strip():
            problems.append(problem("content-empty", f"{at} ({role}) content is empty"))
            continue
        turns.append((role, content))
    if problems:
        return None, problems
    ordered, problems = _check_order(tuple(turns), problem)
    if ordered is None:
        return None, problems
    if len(untrained) == sum(1 for role, _ in ordered if role == "assistant"):
        return None, [
            problem("nothing-trained", "every assistant message has weight 0: the example would train nothing")
        ]
    return Example(file, line, ordered, untrained=tuple(untrained)), []


def _weight(message: dict[str, Any], at: str, problem: Any) -> int | Problem:
    """An assistant message's weight (0 or 1), or the problem with the one it has."""
    weight, role = message["weight"], message.get("role")
    if role != "assistant":
        return problem("weight-not-assistant", f"{at} ({role}) has a weight; only assistant messages are weighted")
    if isinstance(weight, bool) or weight not in WEIGHTS:
        return problem("weight-invalid", f"{at} weight must be 0 or 1 (train on it or not), got {json.dumps(weight)}")
    return int(weight)


def _check_order(
    turns: tuple[tuple[str, Any], ...], problem: Any
) -> tuple[tuple[tuple[str, Any], ...] | None, list[Problem]]:
    """An optional system message first, then user/assistant alternating, user first, assistant last."""
    roles = [role for role, _ in turns]
    for index, role in enumerate(roles):
        if role == "system" and index > 0:
            return None, [
                problem("system-not-first", f"messages[{index}] is a system message; only the first message may be one")
            ]
    start = 1 if roles[0] == "system" else 0
    rest = roles[start:]
    if not rest:
        return None, [problem("no-turns", "only a system message; add a user and an assistant turn")]
    if rest[0] != "user":
        return None, [
            problem("first-not-user", f"messages[{start}] is {rest[0]}; the conversation must start with a user turn")
        ]
    for offset in range(1, len(rest)):
        if rest[offset] == rest[offset - 1]:
            index = start + offset
            return None, [
                problem(
                    "roles-not-alternating",
                    f"messages[{index}] is a second {rest[offset]} turn in a row; user and assistant must alternate",
                )
            ]
    if rest[-1] != "assistant":
        return None, [
            problem(
                "last-not-assistant",
                f"the last message (messages[{len(roles) - 1}]) is {rest[-1]}; a conversation must end with an assistant turn",
            )
        ]
    return turns, []


def _prompt_completion(
    record: dict[str, Any], file: str, line: int
) -> tuple[tuple[tuple[str, Any], ...] | None, list[Problem]]:
    if "messages" in record and "prompt" not in record and "completion" not in record:
        return None, [
            Problem(
                file, line, "error", "prompt-missing", 'no "prompt" key (this is a chat example; set format = "chat")'
            )
        ]
    problems: list[Problem] = []
    values: dict[str, str] = {}
    for key in ("prompt", "completion"):
        if key not in record:
            problems.append(Problem(file, line, "error", f"{key}-missing", f'no "{key}" key'))
        elif not isinstance(record[key], str):
            problems.append(
                Problem(file, line, "error", f"{key}-not-string", f'"{key}" must be a string, got {_kind(record[key])}')
            )
        elif not record[key].strip():
            problems.append(Problem(file, line, "error", f"{key}-empty", f'"{key}" is empty'))
        else:
            values[key] = record[key]
    if problems:
        return None, problems
    return (("user", values["prompt"]), ("assistant", values["completion"])), []


def split_eval(examples: list[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """(train, eval): a seeded, order-keeping split that every reader reproduces exactly."""
    indices = list(range(len(examples)))
    random.Random(seed).shuffle(indices)
    chosen = set(indices[: round(len(examples) * fraction)])
    train = [ex for i, ex in enumerate(examples) if i not in chosen]
    held_out = [ex for i, ex in enumerate(examples) if i in chosen]
    return train, held_out


# --------------------------------------------------------------------------- preference and prompt data


def _prompt_turns(
    messages: Any, file: str, line: int, at: str
) -> tuple[tuple[tuple[str, str], ...] | None, list[Problem]]:
    """A prompt's turns (`at` names where they are): chat rules, but ending with the user's turn."""

    def problem(code: str, message: str) -> Problem:
        return Problem(file, line, "error", code, message)

    if not isinstance(messages, list):
        return None, [problem("messages-not-list", f"{at} must be an array, got {_kind(messages)}")]
    if not messages:
        return None, [problem("messages-empty", f"{at} is empty")]
    # The chat rules want an answer last: check the prompt with a stand-in answer after it.
    closing = {"role": "assistant", "content": "-"}
    if isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        return None, [
            problem(
                "prompt-ends-with-assistant",
                f"{at}[{len(messages) - 1}] is an assistant message; a prompt ends with the user's turn",
            )
        ]
    parsed, found = _chat({"messages": [*messages, closing]}, file, line)
    if parsed is not None and parsed.untrained:
        found = [
            Problem(
                file,
                line,
                "warning",
                "weight-in-prompt",
                f"messages[{i}] has a weight; a prompt is never trained, so it is ignored",
            )
            for i in parsed.untrained
        ]
    renamed = [Problem(p.file, p.line, p.severity, p.code, p.message.replace("messages[", f"{at}[")) for p in found]
    return (parsed.messages[:-1] if parsed is not None else None), renamed


def _answer(record: dict[str, Any], key: str, file: str, line: int) -> tuple[str | None, list[Problem]]:
    """One side of a preference pair: a list holding one assistant message with non-empty text."""

    def problem(code: str, message: str) -> Problem:
        return Problem(file, line, "error", code, message)

    if key not in record:
        return None, [problem(f"{key.replace('_', '-')}-missing", f'no "{key}" key')]
    side = record[key]
    if isinstance(side, dict):
        side = [side]  # one message given without its list
    if not isinstance(side, list):
        return None, [
            problem("answer-not-list", f'"{key}" must be an array of one assistant message, got {_kind(side)}')
        ]
    if len(side) != 1:
        return None, [problem("answer-count", f'"{key}" must hold exactly one assistant message, got {len(side)}')]
    message = side[0]
    if not isinstance(message, dict):
        return None, [problem("message-not-object", f"{key}[0] must be an object, got {_kind(message)}")]
    if message.get("role") != "assistant":
        return None, [
            problem(
                "answer-not-assistant", f"{key}[0] has role {message.get('role')!r}; an answer is an assistant message"
            )
        ]
    content = message.get("content")
    if not isinstance(content, str):
        return None, [problem("content-not-string", f"{key}[0] content must be a string, got {_kind(content)}")]
    if not content.strip():
        return None, [problem("content-empty", f"{key}[0] content is empty")]
    unknown = [k for k in message if k not in MESSAGE_KEYS]
    if unknown:
        return content, [
            Problem(file, line, "warning", "unknown-key", f"unknown key {_quoted(f'{key}[0].{k}')}; it is ignored")
            for k in unknown
        ]
    return content, []


def _preference(record: dict[str, Any], file: str, line: int) -> tuple[Example | None, list[Problem]]:
    """OpenAI's DPO line: ``{"input": {"messages": [...]}, "preferred_output": [...], "non_preferred_output": [...]}``."""
    if "input" not in record:
        hint = ' (this is a chat example; set format = "chat")' if "messages" in record else ""
        return None, [Problem(file, line, "error", "input-missing", f'no "input" key{hint}')]
    problems: list[Problem] = []
    given = record["input"]
    if not isinstance(given, dict):
        return None, [
            Problem(file, line, "error", "input-not-object", f'"input" must be an object, got {_kind(given)}')
        ]
    if "messages" not in given:
        return None, [Problem(file, line, "error", "messages-missing", 'no "input.messages" key')]
    turns, found = _prompt_turns(given["messages"], file, line, "input.messages")
    problems.extend(found)
    chosen, found = _answer(record, "preferred_output", file, line)
    problems.extend(found)
    rejected, found = _answer(record, "non_preferred_output", file, line)
    problems.extend(found)
    if chosen is not None and rejected is not None and chosen.strip() == rejected.strip():
        problems.append(
            Problem(
                file, line, "error", "sides-identical", "preferred_output and non_preferred_output are the same answer"
            )
        )
    for key in record:
        if key not in EXAMPLE_KEYS["preference"]:
            problems.append(
                Problem(
                    file,
                    line,
                    "warning",
                    "unknown-key",
                    f"unknown key {_quoted(key)} (the preference format has "
                    "input, preferred_output, non_preferred_output); it is ignored",
                )
            )
    for key in given:
        if key not in PREFERENCE_INPUT_KEYS:
            problems.append(
                Problem(file, line, "warning", "unknown-key", f"unknown key {_quoted(f'input.{key}')}; it is ignored")
            )
    if turns is None or chosen is None or rejected is None:
        return None, problems
    return Example(file, line, turns, chosen=chosen, rejected=rejected), problems


def _prompt(record: dict[str, Any], file: str, line: int) -> tuple[Example | None, list[Problem]]:
    """A GRPO prompt: ``{"messages": [... up to the user's turn], "reference": ..., other fields graders read}``."""
    if "messages" not in record:
        hint = ' (this is a preference pair; set format = "preference")' if "input" in record else ""
        return None, [Problem(file, line, "error", "messages-missing", f'no "messages" key{hint}')]
    turns, problems = _prompt_turns(record["messages"], file, line, "messages")
    fields = []
    for key in sorted(k for k in record if k != "messages"):
        if key.startswith("_"):
            problems.append(
                Problem(
                    file, line, "error", "field-reserved", f"field {_quoted(key)}: names starting with '_' are reserved"
                )
            )
            continue
        fields.append((key, json.dumps(record[key], sort_keys=True)))
    if turns is None or any(p.severity == "error" for p in problems):
        return None, problems
    return Example(file, line, turns, fields=tuple(fields)), problems


#: The formats whose lines are not one conversation: each line's parser builds its `Example`.
LINE_PARSERS = {"preference": _preference, "prompt": _prompt}
