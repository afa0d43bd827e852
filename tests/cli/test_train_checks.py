"""`trainkit train` checks once and plans what it starts.

`--plan` and the plan a start prints come from the same checked request and count tokens
the same way (a newcomer saw 76,478 tokens with --plan and 115,896 at the start); bad
options are refused before anything starts; `validate` names each dataset found once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import run_main

from trainkit_core.datasets.local import SHIPPED_DATASETS


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "datasets").mkdir(exist_ok=True)
    return {
        "TRAINKIT_HOME": str(tmp_path / "home"),
        "TRAINKIT_PROVIDER": "local",
        "TRAINKIT_DATASETS_DIR": str(tmp_path / "datasets"),
        "HF_HOME": str(tmp_path / "hf"),
    }


def _token_line(out: str) -> str:
    [line] = [line.strip() for line in out.splitlines() if "tokens per epoch" in line]
    return line


@pytest.mark.ml  # the start needs trainkit-core[train]
def test_the_start_prints_the_token_count_of_the_plan(tmp_path: Path) -> None:
    env = _env(tmp_path)
    code, planned = run_main("train", "--dataset", "demo", "--steps", "2", "--plan", env=env)
    assert code == 0, planned
    code, started = run_main("train", "--dataset", "demo", "--steps", "2", "--detach", env=env)
    run_id = re.search(r"started run (run-\S+)", started)
    try:
        assert code == 0 and run_id, started
        assert _token_line(started) == _token_line(planned)  # the count, how it was counted, and the total
        assert "(exact, " in _token_line(planned)  # the tiny model's tokenizer is built here
        shown = [line for line in planned.splitlines() if line.startswith("  ")]
        assert [line for line in started.splitlines() if line.startswith("  ") and "duration" in line] == [
            line for line in shown if "duration" in line
        ]
    finally:
        if run_id:  # the detached job is not needed: ended now, and waited for
            run_main("runs", "cancel", run_id.group(1), env=env)
            run_main("runs", "wait", run_id.group(1), "--timeout", "60", env=env)


def _pairs(root: Path) -> None:
    """A preference dataset `pairs`: DPO would start on it."""
    folder = root / "pairs"
    folder.mkdir(parents=True)
    (folder / "dataset.toml").write_text('name = "pairs"\nformat = "preference"\ntrain = ["train.jsonl"]\n')
    pair = {
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "preferred_output": [{"role": "assistant", "content": "hello"}],
        "non_preferred_output": [{"role": "assistant", "content": "go away"}],
    }
    (folder / "train.jsonl").write_text((json.dumps(pair) + "\n") * 4)


def test_bad_options_are_refused_before_anything_starts(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _pairs(tmp_path / "datasets")
    cases = [
        (["--method", "dpo", "--loss-type", "nosuch"], "unknown loss type 'nosuch'; known loss types: sigmoid"),
        (["--method", "dpo", "--loss-type", "sigmoid", "--loss-type", "ipo_x"], "unknown loss type 'ipo_x'"),
        (["--method", "dpo", "--beta", "nan"], "dpo_beta: nan is not a number"),
        (["--method", "dpo", "--beta", "-inf"], "dpo_beta: -inf is not a finite number"),
        (["--method", "grpo", "--reward", "exact_match", "--temperature", "nan"], "temperature: nan is not a number"),
        (["--method", "grpo", "--reward", "exact_match", "--kl-coef", "inf"], "kl_coef: inf is not a finite number"),
        (["--method", "grpo", "--reward", "exact_match", "--reward-timeout", "NaN"], "nan is not a number"),
        (["--max-cost", "nan"], "budget max_cost_usd must be a positive number, not nan"),  # the plan checks it too
    ]
    for extra, expected in cases:
        for mode in ("--plan", "--detach"):
            dataset = "pairs" if "dpo" in extra else "demo"
            code, out = run_main("train", "--dataset", dataset, *extra, mode, env=env)
            assert code != 0 and expected in out, (extra, mode, out)
            assert "less than" not in out and "Traceback" not in out
    code, out = run_main("runs", "list", "--json", env=env)
    assert code == 0 and json.loads(out) == [], out


def test_a_missing_dataset_is_missing_for_every_method(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for extra in ([], ["--method", "dpo"], ["--method", "grpo", "--reward", "exact_match"]):
        for mode in ("--plan", "--detach"):
            code, out = run_main("train", "--dataset", "pairs", *extra, mode, env=env)
            assert code != 0 and "no dataset 'pairs'" in out, (extra, mode, out)
            assert "format" not in out, out


def test_validate_names_each_dataset_found_once(tmp_path: Path) -> None:
    env = _env(tmp_path)
    # `trainkit demo` leaves a copy of the shipped demo in the datasets folder.
    copy = tmp_path / "datasets" / "demo"
    copy.mkdir(parents=True)
    for item in SHIPPED_DATASETS.joinpath("demo").iterdir():
        if item.is_file():
            (copy / item.name).write_bytes(item.read_bytes())
    code, out = run_main("validate", "pairs", "--local", env=env)
    assert code != 0 and "no dataset 'pairs'" in out, out
    found = " ".join(out.split()).split("(found: ", 1)[1].split(")", 1)[0].split(", ")
    assert found.count("demo") == 1, out


def test_an_openai_grader_file_joins_a_grpo_run_and_a_bad_one_is_refused_naming_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    grader = {
        "type": "text_similarity",
        "name": "close",
        "input": "{{sample.output_text}}",
        "reference": "{{item.reference}}",
        "evaluation_metric": "rouge_1",
    }
    good, bad = tmp_path / "grader.json", tmp_path / "bad.json"
    good.write_text(json.dumps(grader))
    bad.write_text(json.dumps({**grader, "evaluation_metric": "cosine"}))
    args = ("train", "--dataset", "demo-prompts", "--method", "grpo", "--plan", "--json")
    code, out = run_main(*args, env=env)  # GRPO without a grader is refused ...
    assert code == 2 and "at least one grader" in out, out
    code, out = run_main(*args, "--openai-grader", str(good), env=env)  # ... and the grader file is one
    assert code == 0 and json.loads(out)["steps"] > 0, out
    code, out = run_main(*args, "--openai-grader", str(bad), env=env)
    assert code == 2 and "openai_graders[0].evaluation_metric" in out and "embedding" in out, out
    code, out = run_main(*args, "--openai-grader", str(tmp_path / "missing.json"), env=env)
    assert code == 2 and "missing.json" in out, out
    (tmp_path / "not.json").write_text("{")
    code, out = run_main(*args, "--openai-grader", str(tmp_path / "not.json"), env=env)
    assert code == 2 and "not JSON" in out, out
