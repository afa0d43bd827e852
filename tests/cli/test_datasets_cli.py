"""`trainkit datasets`, `sync` and `validate` against the local provider."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from trainkit_cli.main import build_cli

BAD_LINE = '{"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}]}\n'


@pytest.fixture
def datasets_dir(tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "datasets"
    shutil.copytree(repo_root / "datasets" / "demo", folder / "demo")
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(folder))
    return folder


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_cli(), list(args), catch_exceptions=False)
    return result.exit_code, result.output


def run_json(*args: str) -> dict:
    code, output = run(*args, "--json")
    assert code == 0, output
    return json.loads(output)  # type: ignore[no-any-return]


def test_datasets_lists_and_tracks_the_volume(datasets_dir: Path) -> None:
    listing = run_json("datasets")
    (demo,) = listing["datasets"]
    assert demo["name"] == "demo" and demo["format"] == "chat" and demo["synced"] == "never"
    assert (demo["train_examples"], demo["eval_examples"]) == (4000, 100)
    assert set(demo["files"]) == {"dataset.toml", "train.jsonl", "eval.jsonl"}
    assert demo["size"] == sum(f.stat().st_size for f in (datasets_dir / "demo").iterdir())

    synced = run_json("sync", "demo")
    assert synced["hash"] == demo["hash"] and synced["uploaded_bytes"] == demo["size"]
    assert run_json("datasets")["datasets"][0]["synced"] == "same"
    with open(datasets_dir / "demo" / "eval.jsonl", "a") as handle:
        handle.write(
            '{"messages": [{"role": "user", "content": "Uppercase: a b"}, {"role": "assistant", "content": "A B"}]}\n'
        )
    assert run_json("datasets")["datasets"][0]["synced"] == "different"

    code, table = run("datasets")
    assert code == 0 and "demo" in table and "different" in table


def test_sync_twice_then_one_file_changed(datasets_dir: Path) -> None:
    first = run_json("sync", "demo")
    assert not first["unchanged"] and len(first["files_sent"]) == 3
    code, text = run("sync", "demo")
    assert code == 0 and "unchanged" in text and "nothing sent" in text
    with open(datasets_dir / "demo" / "train.jsonl", "a") as handle:
        handle.write(
            '{"messages": [{"role": "user", "content": "Uppercase: a b"}, {"role": "assistant", "content": "A B"}]}\n'
        )
    third = run_json("sync", "demo")
    assert third["files_sent"] == ["train.jsonl"]
    assert third["uploaded_bytes"] == (datasets_dir / "demo" / "train.jsonl").stat().st_size


def test_validate_volume_and_local(datasets_dir: Path) -> None:
    never = CliRunner().invoke(build_cli(), ["validate", "demo"])
    assert "never synced" in str(never.exception)
    run_json("sync", "demo")
    report = run_json("validate", "demo", "--model-size", "tiny")
    assert report["ok"] and report["source"] == "volume" and report["train_examples"] == 4000
    assert "max 256 tokens" in report["length_check"]

    with open(datasets_dir / "demo" / "train.jsonl", "a") as handle:
        handle.write(BAD_LINE)
    code, text = run("validate", "demo", "--local")
    assert code == 2
    assert "train.jsonl:4001: error [roles-not-alternating]" in text
    code, text = run("validate", "demo")  # the volume still holds the good version
    assert code == 0 and "ok" in text


def test_sync_refuses_an_invalid_dataset_and_writes_nothing(datasets_dir: Path, trainkit_home: Path) -> None:
    with open(datasets_dir / "demo" / "train.jsonl", "a") as handle:
        handle.write(BAD_LINE)
    result = CliRunner().invoke(build_cli(), ["sync", "demo"])
    assert result.exit_code != 0
    assert "train.jsonl:4001" in str(result.exception)
    data = trainkit_home / "volumes" / "trainkit-data"
    assert not (data / "datasets").exists()


def test_strict_validate_fails_on_warnings(datasets_dir: Path) -> None:
    first = (datasets_dir / "demo" / "train.jsonl").read_text().splitlines()[0]
    with open(datasets_dir / "demo" / "train.jsonl", "a") as handle:
        handle.write(first + "\n")
    report = run_json("validate", "demo", "--local")
    assert report["ok"] and report["warnings"] == 1
    code, output = run("validate", "demo", "--local", "--strict", "--json")
    assert code == 2 and json.loads(output)["problems"][0]["code"] == "duplicate"


@pytest.mark.slow
def test_real_command_exit_codes(datasets_dir: Path, cli_env: dict[str, str]) -> None:
    """Through the console entry point, as a user runs it: messages on stderr, exit codes."""
    env = {**cli_env, "TRAINKIT_DATASETS_DIR": str(datasets_dir)}

    def trainkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trainkit_cli", *args], env=env, capture_output=True, text=True, timeout=120
        )

    never = trainkit("validate", "demo")
    assert never.returncode == 3 and "never synced" in never.stderr and "trainkit sync demo" in never.stderr
    assert trainkit("sync", "demo").returncode == 0
    assert trainkit("validate", "demo").returncode == 0
    (datasets_dir / "demo" / "eval.jsonl").write_bytes(
        b"\xef\xbb\xbf" + (datasets_dir / "demo" / "eval.jsonl").read_bytes()
    )
    bad = trainkit("sync", "demo")
    assert bad.returncode == 2 and "eval.jsonl:1: error [bom]" in bad.stderr
    missing = trainkit("sync", "nope")
    assert missing.returncode == 3 and "no dataset 'nope'" in missing.stderr


def test_datasets_lists_a_broken_dataset_with_its_problem(datasets_dir: Path) -> None:
    broken = datasets_dir / "broken"
    broken.mkdir()
    (broken / "dataset.toml").write_text('name = "broken"\ntrain = "train.jsonl"\n')
    (datasets_dir / "not-a-dataset").mkdir()
    listing = run_json("datasets", "--no-remote")
    assert [d["name"] for d in listing["datasets"]] == ["broken", "demo"]
    (problem,) = listing["datasets"][0]["problems"]
    assert (problem["file"], problem["line"], problem["code"]) == ("dataset.toml", 2, "spec-invalid")
    assert listing["datasets"][1]["synced"] == "unknown"
    code, table = run("datasets", "--no-remote")
    assert code == 0 and "invalid" in table
