"""Eval metrics, eval sets and reports on the eval volume, and the eval client's checks. Torch-free."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.evals import client, sets
from trainkit_core.evals.metrics import exact_match, perplexity, summarize, token_f1
from trainkit_core.toolkit.folder_volume import FolderVolume


def _ex(q: str, a: str) -> dict:  # type: ignore[type-arg]
    return {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}


def test_exact_match_keeps_case_and_ignores_spacing() -> None:
    assert exact_match("  SNOW  BLUE\n", "SNOW BLUE") == 1.0
    assert exact_match("snow blue", "SNOW BLUE") == 0.0
    assert exact_match("", "") == 1.0


def test_token_f1_gives_partial_credit() -> None:
    assert token_f1("SNOW BLUE", "snow blue") == 1.0
    assert token_f1("SNOW RED", "SNOW BLUE") == pytest.approx(0.5)
    assert token_f1("SNOW", "SNOW BLUE TREE") == pytest.approx(0.5)
    assert token_f1("", "SNOW") == 0.0 and token_f1("", "") == 1.0
    assert token_f1("a a a", "a") == pytest.approx(0.5)  # repeated words count once each


def test_summary_weights_loss_by_tokens() -> None:
    rows = [
        {"loss_sum": 2.0, "loss_tokens": 2, "exact_match": 1.0, "f1": 1.0},
        {"loss_sum": 6.0, "loss_tokens": 2, "exact_match": 0.0, "f1": 0.5},
    ]
    summary = summarize(rows)
    assert summary["mean_loss"] == 2.0 and summary["perplexity"] == pytest.approx(math.exp(2.0), rel=1e-4)
    assert summary["exact_match"] == 0.5 and summary["f1"] == 0.75 and summary["examples"] == 2
    assert perplexity(1e9) > 0  # no overflow
    assert "end_of_turn_rate" not in summary  # rows that were not generated say nothing about stopping


def test_summary_counts_answers_that_stopped_at_end_of_turn() -> None:
    rows = [
        {"loss_sum": 1.0, "loss_tokens": 1, "exact_match": 1.0, "f1": 1.0, "stopped": True},
        {"loss_sum": 1.0, "loss_tokens": 1, "exact_match": 1.0, "f1": 1.0, "stopped": True},
        {"loss_sum": 1.0, "loss_tokens": 1, "exact_match": 0.0, "f1": 0.5, "stopped": False},
        {"loss_sum": 1.0, "loss_tokens": 1, "exact_match": 0.0, "f1": 0.5, "stopped": True},
    ]
    assert summarize(rows)["end_of_turn_rate"] == 0.75


@pytest.fixture
def volume(tmp_path: Path) -> FolderVolume:
    return FolderVolume(tmp_path / "eval", "eval")


def test_add_examples_appends_skips_duplicates_and_replaces(volume: FolderVolume) -> None:
    assert sets.add_examples(volume, "mini", [_ex("q1", "A1"), _ex("q2", "A2")]) == {
        "set": "mini",
        "added": 2,
        "skipped": 0,
        "total": 2,
    }
    result = sets.add_examples(volume, "mini", [_ex("q2", "A2"), {"prompt": "q3", "completion": "A3"}])
    assert (result["added"], result["skipped"], result["total"]) == (1, 1, 3)
    assert sets.read_set(volume, "mini")[2] == _ex("q3", "A3")
    assert sets.add_examples(volume, "mini", [_ex("q9", "A9")], replace=True)["total"] == 1
    assert sets.list_sets(volume) == [{"name": "mini", "examples": 1}]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ('{"messages": [{"role": "user", "content": "q"}]}', "at least a user and an assistant"),
        (
            '{"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]}',
            "last two messages",
        ),
        (
            '{"messages": [{"role": "robot", "content": "q"}, {"role": "assistant", "content": "a"}]}',
            "message 0 needs a role",
        ),
        (
            '{"messages": [{"role": "user", "content": 3}, {"role": "assistant", "content": "a"}]}',
            "message 0 needs a role",
        ),
        ('{"prompt": "", "completion": "a"}', "prompt non-empty"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_bad_example_files_name_file_and_line_and_change_nothing(volume: FolderVolume, line: str, message: str) -> None:
    sets.add_examples(volume, "mini", [_ex("q1", "A1")])
    before = volume.read_bytes("sets/mini/examples.jsonl")
    data = (json.dumps(_ex("q2", "A2")) + "\n" + line + "\n").encode()
    with pytest.raises(UsageError, match=message) as info:
        sets.add_examples(volume, "mini", sets.parse_jsonl(data, file="new.jsonl"))
    assert "new.jsonl:2" in info.value.message
    assert volume.read_bytes("sets/mini/examples.jsonl") == before


def test_bad_set_names_and_report_ids(volume: FolderVolume) -> None:
    for name in ("../x", "A B", "", "x/y"):
        with pytest.raises(UsageError):
            sets.add_examples(volume, name, [_ex("q", "a")])
    for report_id in ("../../etc", "ev-1", "run-20261130-120000-abcdef"):
        with pytest.raises(UsageError):
            sets.read_report(volume, report_id)
    with pytest.raises(NotFoundError):
        sets.read_report(volume, "ev-20261130-120000-abcdef")
    with pytest.raises(NotFoundError, match="no eval set"):
        sets.read_set(volume, "missing")


def test_reports_round_trip(volume: FolderVolume) -> None:
    report_id = sets.new_report_id()
    report = {"report_id": report_id, "model_path": "trained/x", "tuned": {"exact_match": 1.0}, "base": None}
    sets.write_report(volume, report, [{"index": 0, "reference": "A"}])
    assert sets.read_report(volume, report_id) == report
    assert sets.read_report(volume, report_id, examples=True)["examples"] == [{"index": 0, "reference": "A"}]


def test_eval_client_checks_before_starting_anything(trainkit_home: Path) -> None:
    provider = get_provider("local")
    with pytest.raises(UsageError, match="contains '%'"):
        client.run_eval(provider, model_path="trained%2F..%2Fsecrets", eval_set="mini")
    run_dir = trainkit_home / "volumes" / "trainkit-models" / "trained" / "run-20261130-120000-abcdef"
    run_dir.mkdir(parents=True)
    (run_dir / "adapter_config.json").write_text("{}")
    (run_dir / "adapter_model.safetensors").write_bytes(b"0")
    (run_dir / "trained_model.json").write_text(
        json.dumps({"base_model": "trainkit/tiny-gemma", "chat_format": "gemma3", "dataset_id": ""})
    )
    with pytest.raises(NotFoundError, match="no eval set 'mini'"):
        client.run_eval(provider, model_path="trained/run-20261130-120000-abcdef", eval_set="mini")
    with pytest.raises(UsageError, match="records no dataset"):
        client.run_eval(provider, model_path="trained/run-20261130-120000-abcdef")
    with pytest.raises(UsageError, match="not both"):
        client.run_eval(provider, model_path="trained/run-20261130-120000-abcdef", eval_set="a", dataset="b")
    assert not (trainkit_home / "logs").exists() or not any((trainkit_home / "logs").iterdir())  # no job started
