"""A table of malformed dataset files: each refused at its file and line, none with a traceback.

Written as a careless user or an attacker would produce them: other encodings and
byte order marks, cut-off lines, what Python's `json` accepts beyond RFC 8259, wrong
roles and orders, empty turns, huge lines, other file formats. Each case is checked
twice: by the validator (code, file, line) and through the `trainkit validate --local`
command (exit 2, ``file:line`` printed, no traceback). The cases of
`tests/core/test_dataset_validate.py` are not repeated here.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from cli_helpers import run_main

from trainkit_core.datasets.examples import MAX_LINE_BYTES
from trainkit_core.datasets.strict_json import MAX_DEPTH
from trainkit_core.datasets.validate import validate_local

SPEC = 'name = "{name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def chat(*turns: tuple[object, object]) -> bytes:
    return line({"messages": [{"role": role, "content": content} for role, content in turns]})


def good(i: int) -> bytes:
    return chat(("user", f"question {i}"), ("assistant", f"answer {i}"))


def pair(i: int) -> bytes:
    return line({"prompt": f"p{i}", "completion": f"c{i}"})


G = good(1)  # a good first line: the bad one is line 2 unless a case says otherwise
U = '{"role": "user", "content": "q"}'
A = '{"role": "assistant", "content": "a"}'


def raw(text: str) -> bytes:
    return text.encode("utf-8") + b"\n"


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# (id, format, train.jsonl bytes, code, line, words in the message)
CASES: list[tuple[str, str, bytes, str, int, str]] = [
    # ---- encodings and byte order marks
    ("utf16le-bom", "chat", b"\xff\xfe" + G.decode().encode("utf-16-le"), "not-utf8", 1, "0xff"),
    ("utf16be-no-bom", "chat", G.decode().encode("utf-16-be"), "invalid-json", 1, "invalid JSON"),
    ("utf32-bom", "chat", G.decode().encode("utf-32"), "not-utf8", 1, "not UTF-8"),
    (
        "latin1-line-3",
        "chat",
        G + good(2) + raw('{"messages": [').replace(b"[", "[é".encode("latin-1")),
        "not-utf8",
        3,
        "0xe9",
    ),
    ("cp1252-quotes", "chat", G + b'{"messages": \x93hi\x94}\n', "not-utf8", 2, "0x93"),
    ("overlong-utf8", "chat", G + b'{"messages": "\xc0\xaf"}\n', "not-utf8", 2, "0xc0"),
    ("encoded-surrogate", "chat", G + b'{"messages": "\xed\xa0\x80"}\n', "not-utf8", 2, "0xed"),
    ("cut-multibyte-at-eof", "chat", G + b'{"messages": "\xe2\x82', "not-utf8", 2, "not UTF-8"),
    ("double-bom", "chat", b"\xef\xbb\xbf\xef\xbb\xbf" + G, "bom", 1, "byte order mark"),
    ("bom-on-line-2", "chat", G + b"\xef\xbb\xbf" + good(2), "bom", 2, "byte order mark"),
    ("gzip-file", "chat", gzip.compress(G * 3, mtime=0), "not-utf8", 1, "0x8b"),
    ("nul-byte", "chat", G + b'{"messages": []}\x00\n', "invalid-json", 2, "Extra data"),
    # ---- JSON that Python accepts and RFC 8259 does not
    (
        "nan-content",
        "chat",
        G + raw(f'{{"messages": [{U}, {{"role": "assistant", "content": NaN}}]}}'),
        "invalid-json",
        2,
        "NaN",
    ),
    ("infinity", "chat", G + raw(f'{{"messages": [{U}, {A}], "score": Infinity}}'), "invalid-json", 2, "Infinity"),
    (
        "minus-infinity",
        "chat",
        G + raw(f'{{"messages": [{U}, {A}], "score": -Infinity}}'),
        "invalid-json",
        2,
        "Infinity",
    ),
    ("overflowing-float", "chat", G + raw(f'{{"messages": [{U}, {A}], "w": 1e999}}'), "invalid-json", 2, "too large"),
    (
        "5000-digit-int",
        "chat",
        G + raw(f'{{"messages": [{U}, {A}], "w": {"9" * 5000}}}'),
        "invalid-json",
        2,
        "too long",
    ),
    (
        "duplicate-content",
        "chat",
        G + raw(f'{{"messages": [{U}, {{"role": "assistant", "content": "a", "content": "b"}}]}}'),
        "invalid-json",
        2,
        "duplicate key",
    ),
    (
        "duplicate-messages",
        "chat",
        G + raw(f'{{"messages": [{U}, {A}], "messages": []}}'),
        "invalid-json",
        2,
        "duplicate key",
    ),
    (
        "lone-high-surrogate",
        "chat",
        G + raw(f'{{"messages": [{U}, {{"role": "assistant", "content": "x\\ud800"}}]}}'),
        "invalid-json",
        2,
        "surrogate",
    ),
    (
        "lone-low-surrogate-key",
        "chat",
        G + raw(f'{{"messages": [{U}, {A}], "\\udc00": 1}}'),
        "invalid-json",
        2,
        "surrogate",
    ),
    (
        "nested-100k",
        "chat",
        G + raw(f'{{"messages": [{U}, {A}], "x": {deep(100_000)}}}'),
        "invalid-json",
        2,
        "nested too deeply",
    ),
    (
        "nested-past-limit",
        "chat",
        G + raw(f'{{"messages": [{U}, {A}], "x": {deep(MAX_DEPTH + 1)}}}'),
        "invalid-json",
        2,
        "nested too deeply",
    ),
    # ---- not JSON lines at all
    (
        "python-dict",
        "chat",
        G + raw("{'messages': [{'role': 'user', 'content': 'q'}]}"),
        "invalid-json",
        2,
        "property name",
    ),
    ("trailing-comma", "chat", G + raw(f'{{"messages": [{U}, {A},]}}'), "invalid-json", 2, "invalid JSON"),
    ("comment", "chat", G + raw(f'{{"messages": [{U}, {A}]}} // second'), "invalid-json", 2, "Extra data"),
    (
        "raw-tab-in-string",
        "chat",
        G + raw(f'{{"messages": [{U}, {{"role": "assistant", "content": "a\tb"}}]}}'),
        "invalid-json",
        2,
        "control character",
    ),
    ("two-objects-one-line", "chat", G + good(2).rstrip() + good(3), "invalid-json", 2, "Extra data"),
    (
        "json-array-file",
        "chat",
        b"[\n" + G.rstrip() + b",\n" + good(2).rstrip() + b"\n]\n",
        "invalid-json",
        1,
        "invalid JSON",
    ),
    ("pretty-printed", "chat", json.dumps(json.loads(G), indent=2).encode() + b"\n", "invalid-json", 1, "invalid JSON"),
    (
        "truncated-last-line",
        "chat",
        G + b'{"messages": [{"role": "user", "content": "a"}',
        "invalid-json",
        2,
        "invalid JSON",
    ),
    ("cr-only-line-ends", "chat", (G + good(2)).replace(b"\n", b"\r"), "invalid-json", 1, "Extra data"),
    ("csv-file", "chat", b"prompt,completion\nhello,world\n", "invalid-json", 1, "invalid JSON"),
    (
        "huge-line",
        "chat",
        G + b'{"messages": "' + b"x" * (MAX_LINE_BYTES + 1) + b'"}\n',
        "line-too-large",
        2,
        "over the limit",
    ),
    ("top-level-null", "chat", G + b"null\n", "not-object", 2, "null"),
    ("top-level-number", "chat", G + b"42\n", "not-object", 2, "a number"),
    # ---- wrong roles, orders and empty turns
    ("role-capitalised", "chat", G + chat(("User", "q"), ("assistant", "a")), "role-unknown", 2, "'User'"),
    ("role-trailing-space", "chat", G + chat(("user ", "q"), ("assistant", "a")), "role-unknown", 2, "'user '"),
    ("role-number", "chat", G + chat((1, "q"), ("assistant", "a")), "role-unknown", 2, "unknown role"),
    ("role-tool", "chat", G + chat(("user", "q"), ("tool", "a")), "tool-call-id-missing", 2, "tool_call_id"),
    ("empty-string-turn", "chat", G + chat(("user", ""), ("assistant", "a")), "content-empty", 2, "messages[0]"),
    ("newlines-only-turn", "chat", G + chat(("user", "q"), ("assistant", "\n\n\t")), "content-empty", 2, "messages[1]"),
    (
        "openai-parts-content",
        "chat",
        G + chat(("user", [{"type": "input_text", "text": "q"}]), ("assistant", "a")),
        "part-type-unknown",
        2,
        "'input_text'",
    ),
    (
        "object-content",
        "chat",
        G + chat(("user", {"text": "q"}), ("assistant", "a")),
        "content-not-string",
        2,
        "an object",
    ),
    (
        "two-system-messages",
        "chat",
        G + chat(("system", "s"), ("system", "t"), ("user", "q"), ("assistant", "a")),
        "system-not-first",
        2,
        "messages[1]",
    ),
    ("assistant-only", "chat", G + chat(("assistant", "a")), "first-not-user", 2, "messages[0]"),
    ("user-only", "chat", G + chat(("user", "q")), "last-not-assistant", 2, "messages[0]"),
    (
        "messages-object",
        "chat",
        G + line({"messages": {"role": "user", "content": "q"}}),
        "messages-not-list",
        2,
        "an object",
    ),
    ("messages-null", "chat", G + line({"messages": None}), "messages-not-list", 2, "null"),
    # ---- mixed formats
    ("pair-in-chat-file-line-3", "chat", G + good(2) + pair(1), "messages-missing", 3, "prompt_completion"),
    ("chat-in-pair-file", "prompt_completion", pair(1) + good(2), "prompt-missing", 2, 'format = "chat"'),
    (
        "blank-prompt",
        "prompt_completion",
        pair(1) + line({"prompt": " \n", "completion": "c"}),
        "prompt-empty",
        2,
        "empty",
    ),
    (
        "null-completion",
        "prompt_completion",
        pair(1) + line({"prompt": "p", "completion": None}),
        "completion-not-string",
        2,
        "null",
    ),
    (
        "list-prompt",
        "prompt_completion",
        pair(1) + line({"prompt": ["p"], "completion": "c"}),
        "prompt-not-string",
        2,
        "an array",
    ),
]


def make(tmp_path: Path, train: bytes, fmt: str = "chat", name: str = "ds") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "dataset.toml").write_text(SPEC.format(name=name, fmt=fmt))
    (folder / "train.jsonl").write_bytes(train)
    (folder / "eval.jsonl").write_bytes(good(100) if fmt == "chat" else pair(100))
    return folder


def test_the_table_is_large_and_distinct() -> None:
    assert len(CASES) >= 30
    assert len({case[0] for case in CASES}) == len(CASES)
    assert len({case[2] for case in CASES}) == len(CASES)


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


# ------------------------------------------------------------------ spec and links


def test_a_file_linked_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret.jsonl"
    outside.write_bytes(good(1))
    folder = make(tmp_path, good(2))
    (folder / "train.jsonl").unlink()
    os.symlink(outside, folder / "train.jsonl")
    report = validate_local(folder)
    assert [(p.file, p.code) for p in report.errors] == [("train.jsonl", "file-outside")]

    status, output = run_main("validate", str(folder), "--local")
    assert status == 2 and "Traceback" not in output and "file-outside" in output


def test_a_spec_linked_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    other = make(tmp_path, good(1), name="other")
    folder = tmp_path / "ds"
    folder.mkdir()
    os.symlink(other / "dataset.toml", folder / "dataset.toml")
    report = validate_local(folder)
    assert [(p.file, p.code) for p in report.errors] == [("dataset.toml", "file-outside")]


def test_links_inside_the_folder_and_a_linked_folder_are_fine(tmp_path: Path) -> None:
    folder = make(tmp_path, good(1) + good(2))
    (folder / "data").mkdir()
    (folder / "train.jsonl").rename(folder / "data" / "real.jsonl")
    os.symlink(Path("data") / "real.jsonl", folder / "train.jsonl")
    assert validate_local(folder).ok()
    (tmp_path / "links").mkdir()
    os.symlink(folder, tmp_path / "links" / "ds")
    assert validate_local(tmp_path / "links" / "ds").ok()


@pytest.mark.parametrize(
    ("spec", "code", "lineno", "words"),
    [
        ('name = "Up.Case"\ntrain = ["train.jsonl"]\n', "spec-invalid", 1, "lower-case"),
        ('name = "my.data"\ntrain = ["train.jsonl"]\n', "spec-invalid", 1, "lower-case"),
        ('train = ["train.jsonl"]\nname = "-x"\n', "spec-invalid", 2, "lower-case"),
    ],
    ids=["upper-case", "dot", "leading-dash"],
)
def test_spec_names_follow_the_one_naming_rule(tmp_path: Path, spec: str, code: str, lineno: int, words: str) -> None:
    folder = make(tmp_path, good(1))
    (folder / "dataset.toml").write_text(spec)
    report = validate_local(folder)
    assert [(p.file, p.line, p.code) for p in report.errors][:1] == [("dataset.toml", lineno, code)]
    assert words in report.errors[0].message


def test_a_utf16_spec_is_refused(tmp_path: Path) -> None:
    folder = make(tmp_path, good(1))
    (folder / "dataset.toml").write_bytes(SPEC.format(name="ds", fmt="chat").encode("utf-16"))
    status, output = run_main("validate", str(folder), "--local")
    assert status == 2 and "Traceback" not in output and "dataset.toml" in output and "not-utf8" in output
