"""Reading JSONL examples: line by line, every problem kept with its line.

One parser serves the validator and the job-side reader, so what validation accepts
is exactly what training reads. Each accepted example is normalised to
``{"messages": [{"role", "content"}, ...]}``: a prompt/completion pair becomes a user
turn and an assistant turn. Keys the format does not define (in an example or in a
message) are reported as `unknown-key` warnings at their line and dropped (an error
under ``--strict``). Each line must be strict JSON (`trainkit_core.strict_json`: no
NaN, no duplicate keys, no lone surrogates) and at most `MAX_LINE_BYTES` long.
A system message stays in the
list (first only); the Gemma turn format folds it into the first user turn later
(`trainkit_core.chat_format`), as ``system + "\\n\\n" + user``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from trainkit_core.datasets.images import as_openai, image_urls, parse_content, text_of
from trainkit_core.datasets.problems import Problem
from trainkit_core.strict_json import StrictJSONError, loads

ROLES = ("system", "user", "assistant")
BOM = b"\xef\xbb\xbf"
#: The longest line accepted (bytes): far above any example a model can train on.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: The keys each format defines; any other key is reported (`unknown-key`).
EXAMPLE_KEYS = {"chat": ("messages",), "prompt_completion": ("prompt", "completion")}
MESSAGE_KEYS = ("role", "content")


@dataclass(frozen=True)
class Example:
    """One accepted example and where it came from."""

    file: str
    line: int
    #: (role, content), hashable for duplicate checks; a content with images is a
    #: tuple of parts (`trainkit_core.datasets.images`).
    messages: tuple[tuple[str, Any], ...]

    def as_record(self) -> dict[str, Any]:
        return {"messages": [{"role": role, "content": as_openai(content)} for role, content in self.messages]}

    @property
    def image_urls(self) -> list[str]:
        return [url for _, content in self.messages for url in image_urls(content)]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def chars(self) -> int:
        return sum(len(text_of(content)) for _, content in self.messages)


def parse_jsonl(data: bytes, file: str, fmt: str) -> tuple[list[Example], list[Problem]]:
    """Every example of one JSONL file, and every problem with its line.

    Blank lines are skipped. A bad line is reported and left out; parsing goes on, so
    one run of the validator names all the problems of a file.
    """
    examples: list[Example] = []
    problems: list[Problem] = []
    if data.startswith(BOM):
        problems.append(
            Problem(
                file, 1, "error", "bom", "file starts with a UTF-8 byte order mark (BOM); save it as UTF-8 without BOM"
            )
        )
        data = data[len(BOM) :]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.removesuffix(b"\r")
        if len(raw) > MAX_LINE_BYTES:
            problems.append(
                Problem(
                    file,
                    number,
                    "error",
                    "line-too-large",
                    f"line of {len(raw)} bytes is over the limit of {MAX_LINE_BYTES} bytes",
                )
            )
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(
                Problem(
                    file,
                    number,
                    "error",
                    "not-utf8",
                    f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}",
                )
            )
            continue
        if not text.strip():
            continue
        try:
            record = loads(text)
        except StrictJSONError as exc:
            problems.append(Problem(file, number, "error", "invalid-json", f"invalid JSON: {exc}"))
            continue
        if not isinstance(record, dict):
            problems.append(
                Problem(file, number, "error", "not-object", f"each line must be a JSON object, got {_kind(record)}")
            )
            continue
        messages, line_problems = (_chat if fmt == "chat" else _prompt_completion)(record, file, number)
        problems.extend(line_problems)
        problems.extend(_unknown_keys(record, fmt, file, number))
        if messages is not None and not line_problems:
            examples.append(Example(file, number, messages))
    return examples, problems


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
                        found.append((f"messages[{index}].{key}", "a message has role and content"))
    return [
        Problem(file, line, "warning", "unknown-key", f"unknown key {_quoted(key)} ({why}); it is ignored")
        for key, why in found
    ]


def _quoted(key: str) -> str:
    return repr(key if len(key) <= 60 else key[:60] + "…")


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _chat(record: dict[str, Any], file: str, line: int) -> tuple[tuple[tuple[str, Any], ...] | None, list[Problem]]:
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
    for index, message in enumerate(messages):
        at = f"messages[{index}]"
        if not isinstance(message, dict):
            problems.append(problem("message-not-object", f"{at} must be an object, got {_kind(message)}"))
            continue
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
    return _check_order(tuple(turns), problem)


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


def count_examples(data: bytes) -> int:
    """Non-blank lines: the example count a listing shows without parsing every line."""
    return sum(1 for line in data.split(b"\n") if line.strip())
