"""Validation: each malformed file gives the right problem, file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainkit_core.datasets.examples import Example, parse_jsonl, split_eval
from trainkit_core.datasets.spec import load_spec
from trainkit_core.datasets.validate import LengthCheck, length_check_for, validate_local
from trainkit_core.errors import UsageError

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
SPEC = 'name = "{name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def chat(*turns: tuple[str, object]) -> bytes:
    return line({"messages": [{"role": role, "content": content} for role, content in turns]})


def good(i: int) -> bytes:
    return chat(("user", f"question {i}"), ("assistant", f"answer {i}"))


def make(
    tmp_path: Path,
    train: bytes,
    *,
    eval_: bytes | None = None,
    spec: str | None = None,
    name: str = "ds",
    fmt: str = "chat",
) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "dataset.toml").write_text(spec if spec is not None else SPEC.format(name=name, fmt=fmt))
    (folder / "train.jsonl").write_bytes(train)
    (folder / "eval.jsonl").write_bytes(eval_ if eval_ is not None else good(100))
    return folder


# (id, train.jsonl content, code, line, words in the message). The bad line is line 2,
# after one good example, unless the case says otherwise.
MALFORMED = [
    ("invalid-json", good(1) + b'{"messages": [}\n', "invalid-json", 2, "invalid JSON"),
    ("truncated-json", good(1) + b'{"messages": [{"role": "user"\n', "invalid-json", 2, "invalid JSON"),
    ("not-utf8", good(1) + b'{"messages": "caf\xe9"}\n', "not-utf8", 2, "0xe9"),
    ("bom", b"\xef\xbb\xbf" + good(1), "bom", 1, "byte order mark"),
    ("not-object", good(1) + b"[1, 2]\n", "not-object", 2, "an array"),
    ("string-line", good(1) + b'"just text"\n', "not-object", 2, "a string"),
    ("messages-missing", good(1) + line({"text": "x"}), "messages-missing", 2, '"messages"'),
    ("prompt-in-chat", good(1) + line({"prompt": "a", "completion": "b"}), "messages-missing", 2, "prompt_completion"),
    ("messages-not-list", good(1) + line({"messages": "hi"}), "messages-not-list", 2, "a string"),
    ("messages-empty", good(1) + line({"messages": []}), "messages-empty", 2, "empty"),
    ("message-not-object", good(1) + line({"messages": ["hi"]}), "message-not-object", 2, "messages[0]"),
    ("role-missing", good(1) + line({"messages": [{"content": "x"}]}), "role-missing", 2, "messages[0]"),
    ("role-unknown", good(1) + chat(("user", "a"), ("bot", "b")), "role-unknown", 2, "'bot'"),
    ("role-model", good(1) + chat(("user", "a"), ("model", "b")), "role-unknown", 2, "assistant"),
    ("content-missing", good(1) + line({"messages": [{"role": "user"}]}), "content-missing", 2, "messages[0]"),
    (
        "content-part-not-object",
        good(1) + chat(("user", ["a"]), ("assistant", "b")),
        "part-not-object",
        2,
        "content[0]",
    ),
    ("content-null", good(1) + chat(("user", None), ("assistant", "b")), "content-not-string", 2, "null"),
    ("content-empty", good(1) + chat(("user", "a"), ("assistant", "   ")), "content-empty", 2, "messages[1]"),
    (
        "system-not-first",
        good(1) + chat(("user", "a"), ("system", "s"), ("assistant", "b")),
        "system-not-first",
        2,
        "messages[1]",
    ),
    (
        "first-not-user",
        good(1) + chat(("assistant", "a"), ("user", "b"), ("assistant", "c")),
        "first-not-user",
        2,
        "start with a user",
    ),
    (
        "not-alternating",
        good(1) + chat(("user", "a"), ("user", "b"), ("assistant", "c")),
        "roles-not-alternating",
        2,
        "messages[1]",
    ),
    (
        "two-assistants",
        good(1) + chat(("user", "a"), ("assistant", "b"), ("assistant", "c")),
        "roles-not-alternating",
        2,
        "messages[2]",
    ),
    (
        "last-not-assistant",
        good(1) + chat(("user", "a"), ("assistant", "b"), ("user", "c")),
        "last-not-assistant",
        2,
        "end with an assistant",
    ),
    ("system-only", good(1) + chat(("system", "s")), "no-turns", 2, "only a system"),
    ("bad-line-after-blank", good(1) + b"\n\n" + b"{oops}\n", "invalid-json", 4, "invalid JSON"),
    (
        "crlf-line-3",
        good(1) + b"\r\n" + good(2).rstrip(b"\n") + b"\r\n" + line({"messages": 3}),
        "messages-not-list",
        4,
        "a number",
    ),
]


@pytest.mark.parametrize(("case", "train", "code", "lineno", "words"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_train_file(tmp_path: Path, case: str, train: bytes, code: str, lineno: int, words: str) -> None:
    report = validate_local(make(tmp_path, train))
    assert not report.ok()
    errors = [p for p in report.errors if p.code == code]
    assert errors, report.error_text()
    problem = errors[0]
    assert (problem.file, problem.line) == ("train.jsonl", lineno)
    assert words in problem.message
    assert problem.describe().startswith(f"train.jsonl:{lineno}: error [{code}]")


def test_every_problem_of_a_file_is_reported(tmp_path: Path) -> None:
    train = good(1) + b"{bad\n" + line({"messages": []}) + good(2) + chat(("user", "a"), ("bot", "b"))
    report = validate_local(make(tmp_path, train))
    assert [(p.line, p.code) for p in report.errors] == [
        (2, "invalid-json"),
        (3, "messages-empty"),
        (5, "role-unknown"),
    ]
    assert report.train_examples == 2


PROMPT_COMPLETION = [
    ("prompt-missing", line({"completion": "b"}), "prompt-missing"),
    ("completion-missing", line({"prompt": "a"}), "completion-missing"),
    ("prompt-not-string", line({"prompt": 1, "completion": "b"}), "prompt-not-string"),
    ("completion-empty", line({"prompt": "a", "completion": ""}), "completion-empty"),
    ("chat-in-pairs", line(GOOD), "prompt-missing"),
]


@pytest.mark.parametrize(("case", "bad", "code"), PROMPT_COMPLETION, ids=[c[0] for c in PROMPT_COMPLETION])
def test_malformed_prompt_completion(tmp_path: Path, case: str, bad: bytes, code: str) -> None:
    ok = line({"prompt": "p", "completion": "c"})
    report = validate_local(
        make(tmp_path, ok + bad, eval_=line({"prompt": "q", "completion": "d"}), fmt="prompt_completion")
    )
    assert [(p.file, p.line, p.code) for p in report.errors] == [("train.jsonl", 2, code)]


SPECS = [
    ("toml-invalid", 'name = "ds"\ntrain = [train.jsonl]\n', "toml-invalid", 2, "invalid TOML"),
    ("toml-unclosed", 'name = "ds"\ntrain = ["train.jsonl"\n', "toml-invalid", 2, "invalid TOML"),
    ("unknown-format", 'name = "ds"\nformat = "alpaca"\ntrain = ["train.jsonl"]\n', "spec-invalid", 2, "format"),
    ("no-train", 'name = "ds"\n', "spec-invalid", None, "train"),
    ("name-differs", 'name = "other"\ntrain = ["train.jsonl"]\n', "spec-invalid", 1, "folder name"),
    ("not-jsonl", 'name = "ds"\ntrain = ["train.csv"]\n', "spec-invalid", 2, ".jsonl"),
    ("outside", 'name = "ds"\ntrain = ["../x.jsonl"]\n', "spec-invalid", 2, "inside the dataset folder"),
    ("unknown-key", 'name = "ds"\ntrain = ["train.jsonl"]\nepochs = 3\n', "spec-invalid", 3, "epochs"),
    (
        "eval-both",
        'name = "ds"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\neval_fraction = 0.1\n',
        "spec-invalid",
        None,
        "not both",
    ),
    ("bad-fraction", 'name = "ds"\ntrain = ["train.jsonl"]\neval_fraction = 1.5\n', "spec-invalid", 3, "eval_fraction"),
]


@pytest.mark.parametrize(("case", "spec", "code", "lineno", "words"), SPECS, ids=[c[0] for c in SPECS])
def test_malformed_spec(tmp_path: Path, case: str, spec: str, code: str, lineno: int | None, words: str) -> None:
    report = validate_local(make(tmp_path, good(1), spec=spec))
    assert [(p.file, p.code) for p in report.errors][:1] == [("dataset.toml", code)], report.error_text()
    assert report.errors[0].line == lineno
    assert words in report.errors[0].message


def test_missing_and_empty_files(tmp_path: Path) -> None:
    folder = make(tmp_path, b"\n\n", spec='name = "ds"\ntrain = ["train.jsonl", "more.jsonl"]\neval = ["eval.jsonl"]\n')
    (folder / "eval.jsonl").write_bytes(b"")
    report = validate_local(folder)
    found = {(p.file, p.code) for p in report.errors}
    assert found == {("train.jsonl", "file-empty"), ("more.jsonl", "file-missing"), ("eval.jsonl", "eval-empty")}


def test_eval_overlap_is_an_error_and_duplicates_warn(tmp_path: Path) -> None:
    train = good(1) + good(2) + good(1)
    report = validate_local(make(tmp_path, train, eval_=good(3) + good(2)))
    assert [(p.file, p.line, p.code, p.severity) for p in report.problems] == [
        ("train.jsonl", 3, "duplicate", "warning"),
        ("eval.jsonl", 2, "eval-overlap", "error"),
    ]
    assert "train.jsonl:2" in report.problems[1].message
    assert "train.jsonl:1" in report.problems[0].message


def test_warnings_fail_only_when_strict(tmp_path: Path) -> None:
    report = validate_local(make(tmp_path, good(1) + good(1)))
    assert report.ok() and not report.ok(strict=True)
    assert [p.code for p in report.warnings] == ["duplicate"]


def test_eval_split_selecting_nothing_is_an_error(tmp_path: Path) -> None:
    spec = 'name = "ds"\ntrain = ["train.jsonl"]\neval_fraction = 0.01\n'
    report = validate_local(make(tmp_path, good(1) + good(2) + good(3), spec=spec))
    assert [(p.file, p.code) for p in report.errors] == [("dataset.toml", "eval-empty")]


def test_length_warning_uses_the_stated_estimate(tmp_path: Path) -> None:
    long = chat(("user", "x" * 400), ("assistant", "y"))
    report = validate_local(make(tmp_path, good(1) + long), length=LengthCheck.estimate(64))
    assert [(p.line, p.code, p.severity) for p in report.problems] == [(2, "too-long", "warning")]
    assert "4 characters per token" in report.problems[0].message
    assert report.length_check.startswith("estimate")


def test_length_with_a_tokenizer(tmp_path: Path) -> None:
    class Words:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[str]:
            return text.split()

    folder = make(tmp_path, good(1) + chat(("user", "a b c d e f"), ("assistant", "g")))
    report = validate_local(folder, length=length_check_for(None, max_tokens=6, tokenizer=Words()))
    assert [(p.line, p.code) for p in report.problems] == [(2, "too-long")]
    assert "tokenizer" in report.length_check


def test_preset_sets_the_maximum() -> None:
    check = length_check_for("tiny")
    assert check.max_tokens == 256 and "estimate" in check.description
    assert length_check_for("tiny", max_tokens=99).max_tokens == 99
    with pytest.raises(UsageError, match="unknown model size"):
        length_check_for("huge")


def test_system_first_is_accepted_and_kept(tmp_path: Path) -> None:
    data = chat(("system", "be brief"), ("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"))
    examples, problems = parse_jsonl(data, "t.jsonl", "chat")
    assert problems == []
    assert examples[0].as_record()["messages"][0] == {"role": "system", "content": "be brief"}


def test_system_message_folds_into_first_user_turn() -> None:
    """The documented rule (docs/reference/dataset-format.md), as the shared chat format applies it."""
    from trainkit_core.models.chat_format import GEMMA3, render

    data = chat(("system", "be brief"), ("user", "hi"), ("assistant", "yo"))
    record = parse_jsonl(data, "t.jsonl", "chat")[0][0].as_record()
    assert "<start_of_turn>user\nbe brief\n\nhi<end_of_turn>" in render(record["messages"], GEMMA3)


def test_prompt_completion_normalises_to_two_turns() -> None:
    examples, _ = parse_jsonl(line({"prompt": "p", "completion": "c", "meta": 1}), "t.jsonl", "prompt_completion")
    assert examples[0].as_record() == {
        "messages": [{"role": "user", "content": "p"}, {"role": "assistant", "content": "c"}]
    }


def test_split_is_seeded_and_disjoint() -> None:
    examples = [Example("t.jsonl", i, (("user", str(i)), ("assistant", "x"))) for i in range(1, 101)]
    train, held_out = split_eval(examples, 0.2, seed=7)
    again = split_eval(examples, 0.2, seed=7)
    assert (train, held_out) == again
    assert len(held_out) == 20 and len(train) == 80
    assert not {e.line for e in train} & {e.line for e in held_out}
    assert split_eval(examples, 0.2, seed=8)[1] != held_out


def test_load_spec_raises_with_every_problem() -> None:
    with pytest.raises(UsageError, match=r"dataset.toml:2: error \[spec-invalid\] format"):
        load_spec(b'name = "x"\nformat = "nope"\ntrain = ["a.jsonl"]\n')


def test_demo_dataset_is_valid_and_generated(repo_root: Path, tmp_path: Path) -> None:
    """The bundled demo validates cleanly, and its generator reproduces it byte for byte."""
    import subprocess
    import sys

    demo = repo_root / "datasets" / "demo"
    report = validate_local(demo, length=length_check_for("tiny"))
    assert report.problems == [] and report.train_examples >= 200 and report.eval_examples >= 40
    out = tmp_path / "demo"
    subprocess.run(
        [sys.executable, str(repo_root / "scripts" / "make_demo_dataset.py"), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    for name in ("dataset.toml", "train.jsonl", "eval.jsonl"):
        assert (out / name).read_bytes() == (demo / name).read_bytes()
