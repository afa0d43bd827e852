"""Malformed preference (DPO) and prompt (GRPO) files, each refused at its file and line.

Like `test_dataset_malformed.py` for chat data: the validator's code, file and line, and
`trainkit validate --local` exiting 2 with ``file:line`` and no traceback. Good files of
both formats pass, and a line that is fine in one format is refused in the other with a
hint naming the right one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_main

from trainkit_core.datasets.validate import check_local, validate_local

SPEC = 'name = "{name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\n'


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def pref(i: int, **change: object) -> bytes:
    record: dict[str, object] = {
        "input": {"messages": [user(f"question {i}")]},
        "preferred_output": [assistant(f"good answer {i}.")],
        "non_preferred_output": [assistant(f"bad answer {i}")],
    }
    record.update(change)
    return line({k: v for k, v in record.items() if v is not None})


def prompt(i: int, **change: object) -> bytes:
    record: dict[str, object] = {"messages": [user(f"question {i}")], "reference": f"answer {i}"}
    record.update(change)
    return line({k: v for k, v in record.items() if v is not None})


P, Q = pref(1), prompt(1)  # good first lines: the bad one is line 2

# (id, format, train.jsonl bytes, code, line, words in the message)
CASES: list[tuple[str, str, bytes, str, int, str]] = [
    # ---- preference
    ("pref-no-input", "preference", P + pref(2, input=None), "input-missing", 2, '"input"'),
    (
        "pref-chat-line",
        "preference",
        P + line({"messages": [user("q"), assistant("a")]}),
        "input-missing",
        2,
        'format = "chat"',
    ),
    ("pref-input-string", "preference", P + pref(2, input="q"), "input-not-object", 2, "a string"),
    ("pref-no-messages", "preference", P + pref(2, input={"tools": []}), "messages-missing", 2, "input.messages"),
    ("pref-empty-prompt", "preference", P + pref(2, input={"messages": []}), "messages-empty", 2, "input.messages"),
    (
        "pref-prompt-ends-assistant",
        "preference",
        P + pref(2, input={"messages": [user("q"), assistant("a")]}),
        "prompt-ends-with-assistant",
        2,
        "input.messages[1]",
    ),
    (
        "pref-prompt-bad-role",
        "preference",
        P + pref(2, input={"messages": [{"role": "model", "content": "q"}]}),
        "role-unknown",
        2,
        "input.messages[0]",
    ),
    (
        "pref-no-preferred",
        "preference",
        P + pref(2, preferred_output=None),
        "preferred-output-missing",
        2,
        "preferred_output",
    ),
    (
        "pref-no-rejected",
        "preference",
        P + pref(2, non_preferred_output=None),
        "non-preferred-output-missing",
        2,
        "non_preferred_output",
    ),
    (
        "pref-empty-side",
        "preference",
        P + pref(2, preferred_output=[assistant("  ")]),
        "content-empty",
        2,
        "preferred_output[0]",
    ),
    ("pref-side-empty-list", "preference", P + pref(2, non_preferred_output=[]), "answer-count", 2, "got 0"),
    (
        "pref-side-two",
        "preference",
        P + pref(2, preferred_output=[assistant("a"), assistant("b")]),
        "answer-count",
        2,
        "got 2",
    ),
    ("pref-side-user", "preference", P + pref(2, preferred_output=[user("a")]), "answer-not-assistant", 2, "'user'"),
    ("pref-side-string", "preference", P + pref(2, non_preferred_output="no"), "answer-not-list", 2, "a string"),
    (
        "pref-side-number",
        "preference",
        P + pref(2, preferred_output=[{"role": "assistant", "content": 3}]),
        "content-not-string",
        2,
        "a number",
    ),
    (
        "pref-identical",
        "preference",
        P + pref(2, non_preferred_output=[assistant("good answer 2.")]),
        "sides-identical",
        2,
        "same answer",
    ),
    ("pref-not-object", "preference", P + line([1, 2]), "not-object", 2, "an array"),
    ("pref-bad-json-line-3", "preference", P + pref(2) + b'{"input": \n', "invalid-json", 3, "invalid JSON"),
    # ---- prompt
    ("prompt-no-messages", "prompt", Q + line({"reference": "x"}), "messages-missing", 2, '"messages"'),
    ("prompt-pref-line", "prompt", Q + pref(2), "messages-missing", 2, 'format = "preference"'),
    (
        "prompt-ends-assistant",
        "prompt",
        Q + prompt(2, messages=[user("q"), assistant("a")]),
        "prompt-ends-with-assistant",
        2,
        "messages[1]",
    ),
    ("prompt-empty", "prompt", Q + prompt(2, messages=[]), "messages-empty", 2, "empty"),
    ("prompt-not-list", "prompt", Q + prompt(2, messages={"role": "user"}), "messages-not-list", 2, "an object"),
    (
        "prompt-system-only",
        "prompt",
        Q + prompt(2, messages=[{"role": "system", "content": "s"}]),
        "first-not-user",
        2,
        "user turn",
    ),
    ("prompt-empty-content", "prompt", Q + prompt(2, messages=[user("")]), "content-empty", 2, "messages[0]"),
    (
        "prompt-two-users",
        "prompt",
        Q + prompt(2, messages=[user("a"), user("b")]),
        "roles-not-alternating",
        2,
        "second user",
    ),
    ("prompt-reserved-field", "prompt", Q + prompt(2, _where="x"), "field-reserved", 2, "'_where'"),
]


def make(tmp_path: Path, train: bytes, fmt: str, name: str = "ds") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "dataset.toml").write_text(SPEC.format(name=name, fmt=fmt))
    (folder / "train.jsonl").write_bytes(train)
    return folder


def test_the_table_is_large_and_distinct() -> None:
    assert len(CASES) >= 15
    assert len({case[0] for case in CASES}) == len(CASES)
    assert {case[1] for case in CASES} == {"preference", "prompt"}


@pytest.mark.parametrize(("case", "fmt", "train", "code", "lineno", "words"), CASES, ids=[c[0] for c in CASES])
def test_malformed_file_is_refused_at_its_line(
    tmp_path: Path, case: str, fmt: str, train: bytes, code: str, lineno: int, words: str
) -> None:
    folder = make(tmp_path, train, fmt)
    report = validate_local(folder)
    assert not report.ok()
    found = [p for p in report.errors if p.code == code]
    assert found, report.error_text()
    assert (found[0].file, found[0].line) == ("train.jsonl", lineno), report.error_text()
    assert words in found[0].message, found[0].message

    status, output = run_main("validate", str(folder), "--local")
    assert status == 2, output
    assert "Traceback" not in output
    assert f"train.jsonl:{lineno}:" in output and f"[{code}]" in output


def test_good_preference_and_prompt_files_parse_into_their_records(tmp_path: Path) -> None:
    folder = make(
        tmp_path, pref(1) + pref(2, input={"messages": [user("q"), assistant("a"), user("q2")]}), "preference"
    )
    checked = check_local(folder)
    assert checked.report.ok(), checked.report.error_text()
    first, second = (e.as_record() for e in checked.train)
    assert first == {"messages": [user("question 1")], "chosen": "good answer 1.", "rejected": "bad answer 1"}
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]

    folder = make(tmp_path, prompt(1) + prompt(2, pattern=r"\d+", reference=None), "prompt", name="pr")
    checked = check_local(folder)
    assert checked.report.ok(), checked.report.error_text()
    assert [e.as_record() for e in checked.train] == [
        {"messages": [user("question 1")], "reference": "answer 1"},
        {"messages": [user("question 2")], "pattern": r"\d+"},
    ]


def test_a_repeated_pair_is_a_duplicate_but_another_answer_is_not(tmp_path: Path) -> None:
    other = pref(1, non_preferred_output=[assistant("another bad one")])
    report = validate_local(make(tmp_path, pref(1) + other + pref(1), "preference"))
    assert report.ok()
    assert [(p.code, p.line) for p in report.warnings] == [("duplicate", 3)]
