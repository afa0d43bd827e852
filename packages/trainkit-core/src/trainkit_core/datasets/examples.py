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

A chat example may use tools as OpenAI's fine-tuning format has them: ``"tools"`` (the
functions), an assistant's ``"tool_calls"``, ``"tool"`` messages answering them by
``"tool_call_id"``, and an assistant's thinking as ``"reasoning_content"`` (or a content
part ``{"type": "thinking", "thinking": ...}``). Their shape and references are checked
in `trainkit_core.datasets.tool_calls`; where a tool message may come, in `_check_order`.
An `Example` keeps them as JSON text (`Example.tools`, `Example.extras`), hashable like
the rest, and `Example.as_record` gives them back in OpenAI's form.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from trainkit_core.datasets import tool_calls
from trainkit_core.datasets.images import as_openai, image_urls, media_refs, parse_content, text_of
from trainkit_core.datasets.problems import Problem
from trainkit_core.datasets.strict_json import StrictJSONError, loads
from trainkit_core.datasets.tool_calls import dumps
from trainkit_core.datasets.tool_calls import kind as _kind

ROLES = ("system", "user", "assistant", "tool")
BOM = b"\xef\xbb\xbf"
#: The longest line accepted (bytes): far above any example a model can train on.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: Problems reported one by one per file; the rest are counted.
MAX_PROBLEMS_PER_FILE = 100
#: The keys each format defines; any other key is reported (`unknown-key`).
EXAMPLE_KEYS = {
    "chat": ("messages", "tools", "parallel_tool_calls"),  # parallel_tool_calls: accepted, not used
    "prompt_completion": ("prompt", "completion"),
    "preference": ("input", "preferred_output", "non_preferred_output"),
}
#: Keys of an OpenAI preference line's `input` besides `messages` (accepted, not used).
PREFERENCE_INPUT_KEYS = ("messages", "tools", "parallel_tool_calls")
#: The keys of a message in preference and prompt data.
MESSAGE_KEYS = ("role", "content", "weight")
#: The message keys of an `Example`'s `extras`, in the order they are kept.
EXTRA_KEYS = ("tool_calls", "tool_call_id", "reasoning_content")
#: The keys of a chat message: OpenAI's tool calling and thinking besides.
CHAT_MESSAGE_KEYS = (*MESSAGE_KEYS, *EXTRA_KEYS)
#: Keys accepted (and not used) on a message of this role. A tool message's ``name`` (the
#: function's, as many exporters write it) says nothing its tool_call_id does not.
IGNORED_MESSAGE_KEYS = {"tool": ("name",)}
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
    #: Preference answers that call tools: JSON text of each side's calls (OpenAI's form, arguments as objects).
    chosen_calls: str | None = None
    rejected_calls: str | None = None
    #: Prompt data: the line's other fields (what graders read), as sorted (key, JSON text) pairs.
    fields: tuple[tuple[str, str], ...] = ()
    #: Indices into `messages` of the assistant messages with weight 0 (context, not trained).
    untrained: tuple[int, ...] = ()
    #: The functions the model may call: JSON text of OpenAI's tool list, each tool
    #: ``{"type": "function", "function": {"name", "description"?, "parameters"?}}``.
    tools: str | None = None
    #: (index into `messages`, JSON text of an object of the `EXTRA_KEYS` it has) for each
    #: message with any: ``tool_calls`` (arguments as objects), ``tool_call_id``, ``reasoning_content``.
    extras: tuple[tuple[int, str], ...] = ()

    def as_record(self) -> dict[str, Any]:
        """The example in OpenAI's form: what the renderer and the train job read."""
        messages: list[dict[str, Any]] = [
            {"role": role, "content": as_openai(content)} for role, content in self.messages
        ]
        for index, extra in self.extra_fields().items():
            messages[index].update(extra)
        for index in self.untrained:
            messages[index]["weight"] = 0
        record: dict[str, Any] = {"messages": messages}
        if self.tools is not None:
            record["tools"] = json.loads(self.tools)
        if self.chosen is not None:
            record["chosen"], record["rejected"] = self.chosen, self.rejected
        for key, calls in (("chosen_calls", self.chosen_calls), ("rejected_calls", self.rejected_calls)):
            if calls is not None:
                record[key] = json.loads(calls)
        for key, text in self.fields:
            record[key] = json.loads(text)
        return record

    def extra_fields(self) -> dict[int, dict[str, Any]]:
        """The `extras` parsed: message index -> its tool_calls, tool_call_id and reasoning_content."""
        return {index: json.loads(text) for index, text in self.extras}

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two examples the same (duplicates, train/eval overlap)."""
        return (
            self.messages,
            self.chosen,
            self.rejected,
            self.chosen_calls,
            self.rejected_calls,
            self.fields,
            self.untrained,
            self.tools,
            self.extras,
        )

    @property
    def image_urls(self) -> list[str]:
        return [url for _, content in self.messages for url in image_urls(content)]

    @property
    def audio_refs(self) -> list[str]:
        return [ref for _, content in self.messages for ref in media_refs(content, "audio")]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def chars(self) -> int:
        return sum(len(text) for _, text in self.texts())

    def texts(self) -> list[tuple[str, str]]:
        """(where, text) of the text a chat format writes out of this example.

        The contents, the preference answers, the thinking, each call's function name and
        arguments (as JSON) and the tools (as JSON): what length estimates count and the
        chat-marker check reads.
        """
        found = [
            (f"messages[{i}] ({role}) content", text_of(content)) for i, (role, content) in enumerate(self.messages)
        ]
        for index, extra in self.extra_fields().items():
            role = self.messages[index][0]
            if "reasoning_content" in extra:
                found.append((f"messages[{index}] ({role}) reasoning_content", extra["reasoning_content"]))
            for number, call in enumerate(extra.get("tool_calls", [])):
                at = f"messages[{index}].tool_calls[{number}]"
                found.append((f"{at} function name", call["function"]["name"]))
                found.append((f"{at} arguments", dumps(call["function"]["arguments"])))
        if self.chosen is not None and self.rejected is not None:
            found += [("preferred_output[0] content", self.chosen), ("non_preferred_output[0] content", self.rejected)]
        if self.tools is not None:
            found.append(("tools", self.tools))
        return found


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
            markers = _chat_markers(example, file, number)
            if markers:
                return None, [*found, *markers]
        return example, found
    if fmt == "chat":
        parsed, found = _chat(record, file, number)
    else:
        messages, found = _prompt_completion(record, file, number)
        parsed = Example(file, number, messages) if messages is not None else None
    if parsed is not None and not found and not allow_chat_markers:
        found = _chat_markers(parsed, file, number)
    keep = parsed is not None and not found
    found = [*found, *_unknown_keys(record, fmt, file, number)]
    return (parsed if keep else None), found


def _chat_markers(example: Example, file: str, line: int) -> list[Problem]:
    """Text of a chat format's markers in an example's text: it would let one example write turns of its own.

    Every text a format writes out is read (`Example.texts`): contents, thinking, call
    arguments, tool answers, the tools' definitions.
    """
    from trainkit_core.models.chat_format import control_texts

    for where, text in example.texts():
        for marker in control_texts():
            if marker in text:
                return [
                    Problem(
                        file,
                        line,
                        "error",
                        "chat-marker",
                        f"{where} holds the chat marker {marker!r}, which would let this "
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
                role = message.get("role")
                known = (*CHAT_MESSAGE_KEYS, *(IGNORED_MESSAGE_KEYS.get(role, ()) if isinstance(role, str) else ()))
                for key in message:
                    if key not in known:
                        found.append((f"messages[{index}].{key}", f"a message has {', '.join(CHAT_MESSAGE_KEYS)}"))
        found += tool_calls.unknown_keys(record)
    return [
        Problem(file, line, "warning", "unknown-key", f"unknown key {_quoted(key)} ({why}); it is ignored")
        for key, why in found
    ]


def _quoted(key: str) -> str:
    return repr(key if len(key) <= 60 else key[:60] + "…")


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
    tools = None
    if "tools" in record:
        tools, problems = tool_calls.parse_tools(record["tools"], problem)
    turns: list[tuple[str, Any]] = []
    extras: dict[int, dict[str, Any]] = {}
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
                untrained.append(index)
        role = message.get("role")
        if role is None:
            problems.append(problem("role-missing", f'{at} has no "role"'))
            continue
        if role not in ROLES:
            hint = ' (write Gemma\'s "model" role as "assistant")' if role == "model" else ""
            problems.append(
                problem(
                    "role-unknown", f"{at} has unknown role {role!r}; expected system, user, assistant or tool{hint}"
                )
            )
            continue
        content, extra, found = _message(message, role, at, problem)
        problems.extend(found)
        if not found:
            turns.append((role, content))
            if extra:
                extras[index] = extra
    if problems:
        return None, problems
    calls = {index: extra["tool_calls"] for index, extra in extras.items() if "tool_calls" in extra}
    problems = tool_calls.check_calls(calls, tools, problem) or _check_order(turns, extras, problem)
    if problems:
        return None, problems
    if len(untrained) == sum(1 for role, _ in turns if role == "assistant"):
        return None, [
            problem("nothing-trained", "every assistant message has weight 0: the example would train nothing")
        ]
    example = Example(
        file,
        line,
        tuple(turns),
        untrained=tuple(untrained),
        tools=dumps(tools) if tools is not None else None,
        extras=tuple((index, dumps(extra)) for index, extra in sorted(extras.items())),
    )
    return example, []


def _message(message: dict[str, Any], role: str, at: str, problem: Any) -> tuple[Any, dict[str, Any], list[Problem]]:
    """One message's content (normalised) and extras (`EXTRA_KEYS` it has), and its problems.

    An assistant message that makes tool calls may have no content (missing, null or
    empty): it is kept as "". Any other message needs content.
    """
    problems: list[Problem] = []
    extra: dict[str, Any] = {}
    calling = role == "assistant" and "tool_calls" in message
    if "tool_calls" in message and not calling:
        problems.append(
            problem("tool-calls-invalid", f"{at} ({role}) has tool_calls; only assistant messages make calls")
        )
    elif calling:
        calls, found = tool_calls.parse_calls(message["tool_calls"], at, problem)
        problems.extend(found)
        if calls is not None:
            extra["tool_calls"] = calls
    call_id = message.get("tool_call_id")
    if role == "tool" and (not isinstance(call_id, str) or not call_id.strip()):
        problems.append(
            problem("tool-call-id-missing", f'{at} (tool) has no "tool_call_id" (the id of the call it answers)')
        )
    elif role == "tool":
        extra["tool_call_id"] = call_id
    elif "tool_call_id" in message:
        problems.append(
            problem("tool-calls-invalid", f"{at} ({role}) has a tool_call_id; only a tool message answers a call")
        )
    content, reasoning, found = _content(message, role, at, calling, problem)
    problems.extend(found)
    if reasoning:
        extra["reasoning_content"] = reasoning
    return content, extra, problems


def _content(
    message: dict[str, Any], role: str, at: str, calling: bool, problem: Any
) -> tuple[Any, str | None, list[Problem]]:
    """A message's content (normalised), its thinking, and their problems.

    Thinking is ``reasoning_content`` or a content part ``{"type": "thinking", "thinking": ...}``
    (the form of Anthropic-style exports), given once; only an assistant message has it.
    """
    problems: list[Problem] = []
    thinking: list[str] = []
    if "reasoning_content" in message:
        value = message["reasoning_content"]
        if role != "assistant":
            problems.append(
                problem("reasoning-invalid", f"{at} ({role}) has reasoning_content; only assistant messages think")
            )
        elif not isinstance(value, str) or not value.strip():
            got = "an empty string" if isinstance(value, str) else _kind(value)
            problems.append(
                problem("reasoning-invalid", f"{at} reasoning_content must be a non-empty string, got {got}")
            )
        else:
            thinking.append(value)
    content = message.get("content")
    if "content" not in message and not calling:
        return None, None, [*problems, problem("content-missing", f'{at} ({role}) has no "content"')]
    if isinstance(content, list) and content:
        thought, found = _thinking_parts(content, at, role, problem)
        if thought and thinking:
            found.append(
                problem("reasoning-invalid", f"{at} has reasoning_content and a thinking part; give its thinking once")
            )
        thinking += thought
        content, found_in_parts = parse_content(content, at, role, problem, skip=("thinking",))
        problems += found + found_in_parts
    elif calling and content in (None, []):
        content = ""
    elif isinstance(content, list):
        problems += parse_content(content, at, role, problem)[1]  # the empty list's problem
    elif not isinstance(content, str):
        problems.append(
            problem(
                "content-not-string",
                f"{at} ({role}) content must be a string or a list of parts, got {_kind(content)}",
            )
        )
    if isinstance(content, str) and not content.strip() and not problems:
        if calling:
            content = ""
        else:
            only = " (its thinking is no answer)" if thinking else ""
            problems.append(problem("content-empty", f"{at} ({role}) content is empty{only}"))
    return content, "\n".join(thinking) or None, problems


def _thinking_parts(content: list[Any], at: str, role: str, problem: Any) -> tuple[list[str], list[Problem]]:
    """The text of a content's thinking parts, and their problems."""
    found: list[str] = []
    problems: list[Problem] = []
    for index, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "thinking":
            continue
        where, text = f"{at}.content[{index}]", part.get("thinking")
        if role != "assistant":
            problems.append(
                problem(
                    "reasoning-invalid",
                    f"{where} is a thinking part in a {role} message; only assistant messages think",
                )
            )
        elif not isinstance(text, str) or not text.strip():
            problems.append(problem("reasoning-invalid", f'{where} is a thinking part without a non-empty "thinking"'))
        else:
            found.append(text)
    return found, problems


def _weight(message: dict[str, Any], at: str, problem: Any) -> int | Problem:
    """An assistant message's weight (0 or 1), or the problem with the one it has."""
    weight, role = message["weight"], message.get("role")
    if role != "assistant":
        return problem("weight-not-assistant", f"{at} ({role}) has a weight; only assistant messages are weighted")
    if isinstance(weight, bool) or weight not in WEIGHTS:
        return problem("weight-invalid", f"{at} weight must be 0 or 1 (train on it or not), got {json.dumps(weight)}")
    return int(weight)


def _check_order(turns: list[tuple[str, Any]], extras: dict[int, dict[str, Any]], problem: Any) -> list[Problem]:
    """An optional system message first, a user turn next, and each message after one it may follow.

    After a user comes an assistant; after an assistant without tool calls, a user; after
    one with calls, tool messages answering each call once (in any order), then an
    assistant (the model goes on with the answers). The last message is an assistant's:
    one whose calls get no answers trains the calls. The first problem only: the later
    ones are often its consequences.
    """
    roles = [role for role, _ in turns]
    for index, role in enumerate(roles):
        if role == "system" and index > 0:
            return [
                problem("system-not-first", f"messages[{index}] is a system message; only the first message may be one")
            ]
    start = 1 if roles[0] == "system" else 0
    if start == len(roles):
        return [problem("no-turns", "only a system message; add a user and an assistant turn")]
    if roles[start] != "user":
        return [
            problem(
                "first-not-user", f"messages[{start}] is {roles[start]}; the conversation must start with a user turn"
            )
        ]
    caller: int | None = None  # the assistant message whose calls the tool messages answer
    answered: dict[str, bool] = {}  # its calls' ids: answered yet?
    for index in range(start + 1, len(roles)):
        role, before = roles[index], roles[index - 1]
        if role == "tool":
            found = tool_calls.answer_problem(index, extras[index]["tool_call_id"], caller, answered, problem)
            if found is not None:
                return [found]
            continue
        waiting = [call_id for call_id, done in answered.items() if not done]
        if waiting:
            return [
                problem(
                    "tool-call-unanswered",
                    f"messages[{index}] ({role}) comes before tool call(s) {', '.join(map(repr, waiting))} of "
                    f"messages[{caller}] are answered; answer each call with a tool message of its tool_call_id",
                )
            ]
        if role == before:
            return [
                problem(
                    "roles-not-alternating",
                    f"messages[{index}] is a second {role} turn in a row; user and assistant must alternate",
                )
            ]
        if before == "tool" and role == "user":
            return [
                problem(
                    "roles-not-alternating",
                    f"messages[{index}] is a user turn right after tool answers; the assistant goes on after its "
                    "calls are answered",
                )
            ]
        calls = extras.get(index, {}).get("tool_calls", [])
        caller, answered = (index, {call["id"]: False for call in calls}) if calls else (None, {})
    if roles[-1] != "assistant":
        return [
            problem(
                "last-not-assistant",
                f"the last message (messages[{len(roles) - 1}]) is {roles[-1]}; a conversation must end with an assistant turn",
            )
        ]
    return []


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
    for index, message in enumerate(messages):
        if isinstance(message, dict) and (message.get("role") == "tool" or any(k in message for k in EXTRA_KEYS)):
            return None, [
                problem(
                    "prompt-tools-unsupported",
                    f"{at}[{index}] has a tool call, a tool answer or thinking; a prompt here is text turns only, "
                    "which may declare tools (calls and thinking are trained from chat datasets)",
                )
            ]
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


def _answer(
    record: dict[str, Any], key: str, file: str, line: int
) -> tuple[tuple[str, list[dict[str, Any]] | None] | None, list[Problem]]:
    """One side of a preference pair: a list holding one assistant message, with text, calls, or both.

    The answer is (its text, its calls or None); a side of calls only has the text "".
    """
    from trainkit_core.datasets.tool_calls import parse_calls

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
    calls = None
    if "tool_calls" in message:
        calls, found = parse_calls(message["tool_calls"], f"{key}[0]", problem)
        if calls is None:
            return None, found
    content = message.get("content")
    if calls is not None and content in (None, ""):
        content = ""
    elif not isinstance(content, str):
        return None, [problem("content-not-string", f"{key}[0] content must be a string, got {_kind(content)}")]
    elif not content.strip():
        return None, [problem("content-empty", f"{key}[0] content is empty")]
    unknown = [k for k in message if k not in (*MESSAGE_KEYS, "tool_calls")]
    warnings = [
        Problem(file, line, "warning", "unknown-key", f"unknown key {_quoted(f'{key}[0].{k}')}; it is ignored")
        for k in unknown
    ]
    return (content, calls), warnings


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
    if chosen is not None and rejected is not None and _same_answer(chosen, rejected):
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
    tools, found = _declared_tools(given, file, line, "input.tools")
    problems.extend(found)
    if turns is None or chosen is None or rejected is None or found:
        return None, problems
    found = _answer_calls(chosen, rejected, tools, file, line)
    if found:
        return None, [*problems, *found]
    example = Example(
        file,
        line,
        turns,
        chosen=chosen[0],
        rejected=rejected[0],
        chosen_calls=dumps(chosen[1]) if chosen[1] else None,
        rejected_calls=dumps(rejected[1]) if rejected[1] else None,
        tools=tools,
    )
    return example, problems


def _same_answer(first: tuple[str, Any], second: tuple[str, Any]) -> bool:
    def comparable(answer: tuple[str, Any]) -> tuple[str, str]:
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in answer[1] or []]
        return answer[0].strip(), json.dumps(calls, sort_keys=True)

    return comparable(first) == comparable(second)


def _answer_calls(
    chosen: tuple[str, Any], rejected: tuple[str, Any], tools: str | None, file: str, line: int
) -> list[Problem]:
    """The calls of a pair's answers against the tools its input declares (as chat data's calls are checked)."""
    from trainkit_core.datasets.tool_calls import check_calls

    def problem(code: str, message: str) -> Problem:
        return Problem(file, line, "error", code, message)

    found: list[Problem] = []
    for key, (_, calls) in (("preferred_output", chosen), ("non_preferred_output", rejected)):
        if not calls:
            continue
        declared = json.loads(tools) if tools else None
        found += check_calls({0: calls}, declared, problem, at=f"{key}[{{}}]", tools_key="input.tools")
    return found


def _declared_tools(record: dict[str, Any], file: str, line: int, at: str) -> tuple[str | None, list[Problem]]:
    """The functions a prompt declares (``tools``), as `Example.tools` JSON text.

    A DPO pair's or GRPO prompt's model is told of them as in chat data, so it answers the
    prompt it will see in use.
    """
    from trainkit_core.datasets.tool_calls import parse_tools

    if "tools" not in record:
        return None, []

    def problem(code: str, message: str) -> Problem:
        return Problem(file, line, "error", code, message.replace('"tools"', at).replace("tools[", f"{at}["))

    tools, found = parse_tools(record["tools"], problem)
    return (dumps(tools) if tools else None), found


def _prompt(record: dict[str, Any], file: str, line: int) -> tuple[Example | None, list[Problem]]:
    """A GRPO prompt: ``{"messages": [... up to the user's turn], "reference": ..., other fields graders read}``."""
    if "messages" not in record:
        hint = ' (this is a preference pair; set format = "preference")' if "input" in record else ""
        return None, [Problem(file, line, "error", "messages-missing", f'no "messages" key{hint}')]
    turns, problems = _prompt_turns(record["messages"], file, line, "messages")
    tools, found = _declared_tools(record, file, line, "tools")
    problems.extend(found)
    fields = []
    for key in sorted(k for k in record if k not in ("messages", "tools")):
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
    return Example(file, line, turns, fields=tuple(fields), tools=tools), problems


#: The formats whose lines are not one conversation: each line's parser builds its `Example`.
LINE_PARSERS = {"preference": _preference, "prompt": _prompt}
