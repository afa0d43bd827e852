"""`trainkit datasets import-openai FILE NAME`: OpenAI fine-tuning files become datasets, as they are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_main


@pytest.fixture
def datasets_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "datasets"
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(folder))
    return folder


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def _chat(i: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"Count to {i}"}, {"role": "assistant", "content": str(i)}]}


def _pair(i: int) -> dict[str, Any]:
    return {
        "input": {"messages": [{"role": "user", "content": f"Say {i}"}]},
        "preferred_output": [{"role": "assistant", "content": f"{i}."}],
        "non_preferred_output": [{"role": "assistant", "content": f"{i}"}],
    }


def _prompt(i: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"Double {i}"}], "answer": str(2 * i)}


@pytest.mark.parametrize(("make", "fmt"), [(_chat, "chat"), (_pair, "preference"), (_prompt, "prompt")])
def test_each_kind_of_file_becomes_a_dataset_of_its_format(
    tmp_path: Path, datasets_dir: Path, make: Any, fmt: str
) -> None:
    source = _write(tmp_path / "openai.jsonl", [make(i) for i in range(12)])
    valid = _write(tmp_path / "openai-valid.jsonl", [make(i) for i in range(100, 103)])
    code, output = run_main(
        "datasets", "import-openai", str(source), "imported", "--validation-file", str(valid), "--json"
    )
    assert code == 0, output
    report = json.loads(output)
    assert report["ok"] and (report["train_examples"], report["eval_examples"]) == (12, 3)
    folder = datasets_dir / "imported"
    assert f'format = "{fmt}"' in (folder / "dataset.toml").read_text()
    assert (folder / "openai.jsonl").read_bytes() == source.read_bytes()  # as it is, byte for byte
    code, output = run_main("validate", "imported", "--local")
    assert code == 0, output


def test_a_bad_file_is_refused_at_its_line_and_nothing_is_written(tmp_path: Path, datasets_dir: Path) -> None:
    lines = [_chat(i) for i in range(12)]
    lines[6] = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "weight": 3}]}
    source = _write(tmp_path / "broken.jsonl", lines)
    code, output = run_main("datasets", "import-openai", str(source), "broken")
    assert code == 2, output
    assert "broken.jsonl:7:" in output and "weight" in output
    assert not (datasets_dir / "broken").exists()
    assert [p.name for p in datasets_dir.iterdir()] == []  # no temporary folder left either


def test_openai_rules_and_names_are_enforced(tmp_path: Path, datasets_dir: Path) -> None:
    few = _write(tmp_path / "few.jsonl", [_chat(i) for i in range(9)])
    code, output = run_main("datasets", "import-openai", str(few), "few")
    assert code == 2 and "too-few-examples" in output and "at least 10" in output, output
    assert not (datasets_dir / "few").exists()

    enough = _write(tmp_path / "enough.jsonl", [_chat(i) for i in range(10)])
    assert run_main("datasets", "import-openai", str(enough), "enough")[0] == 0
    code, output = run_main("datasets", "import-openai", str(enough), "enough")
    assert code == 2 and "already exists" in output, output
    code, output = run_main("datasets", "import-openai", str(enough), "Not.A.Name")
    assert code == 2 and "invalid" in output, output
    code, output = run_main("datasets", "import-openai", str(tmp_path / "missing.jsonl"), "missing")
    assert code == 2 and "missing.jsonl" in output, output


def test_the_listing_still_answers_without_a_subcommand(tmp_path: Path, datasets_dir: Path) -> None:
    source = _write(tmp_path / "x.jsonl", [_chat(i) for i in range(10)])
    assert run_main("datasets", "import-openai", str(source), "listed")[0] == 0
    code, output = run_main("datasets", "--no-remote", "--json")
    assert code == 0, output
    assert [d["name"] for d in json.loads(output)["datasets"]] == ["listed"]
