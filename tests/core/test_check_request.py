"""One check path for the plan and the start.

`make_plan` (the CLI's ``--plan``, the API's dry run) and `start_run` go through the same
`check_request`: whatever the start refuses, the plan refuses with the same message, and
nothing is written. Every option is checked before anything runs: DPO loss types known to
trl, numbers that are numbers (NaN and infinities named as such), a missing dataset
reported as missing whatever ``--method`` says. Torch-free: every case here is refused
before a job would start.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from trainkit_core import get_provider
from trainkit_core.datasets.local import find_local
from trainkit_core.errors import NotFoundError, TrainkitError, UsageError
from trainkit_core.runs.training_run import RunStore
from trainkit_core.settings import Settings
from trainkit_core.training.plan import make_plan
from trainkit_core.training.submit import check_request, start_run


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    return buffer.getvalue()


def _user_with_picture() -> dict[str, Any]:
    parts = [{"type": "text", "text": "What is in it?"}, {"type": "image_url", "image_url": {"url": "images/a.png"}}]
    return {"role": "user", "content": parts}


def _dataset(root: Path, name: str, fmt: str, records: list[dict[str, Any]]) -> None:
    folder = root / name
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "a.png").write_bytes(_png())
    (folder / "dataset.toml").write_text(f'name = "{name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\n')
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    root = tmp_path / "datasets"
    answer = {"role": "assistant", "content": "a red square"}
    _dataset(root, "pics", "chat", [{"messages": [_user_with_picture(), answer]} for _ in range(4)])
    pair = {
        "input": {"messages": [_user_with_picture()]},
        "preferred_output": [{"role": "assistant", "content": "red"}],
        "non_preferred_output": [{"role": "assistant", "content": "blue"}],
    }
    _dataset(root, "pics-pairs", "preference", [pair] * 4)
    _dataset(root, "pics-prompts", "prompt", [{"messages": [_user_with_picture()], "reference": "red"}] * 4)
    text = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    _dataset(root, "words", "chat", [{"messages": text}] * 4)
    plain_pair = {
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "preferred_output": [{"role": "assistant", "content": "hello"}],
        "non_preferred_output": [{"role": "assistant", "content": "go away"}],
    }
    _dataset(root, "word-pairs", "preference", [plain_pair] * 4)
    thought = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "reasoning_content": "Greet."},
    ]
    _dataset(root, "thoughts", "chat", [{"messages": text}, {"messages": thought}])
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(root))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no cached tokenizer of a real model
    return get_provider("local", Settings.from_env())


def _refusals(provider: Any, config: dict[str, Any]) -> tuple[TrainkitError, TrainkitError]:
    """(the plan's error, the start's error) for `config`; neither may leave a run behind."""
    with pytest.raises(TrainkitError) as planned:
        make_plan(provider, config, exact=False)
    with pytest.raises(TrainkitError) as started:
        start_run(provider, config)
    assert RunStore.for_provider(provider).list() == []
    return planned.value, started.value


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"dataset": "pics"}, "text-only model"),  # tiny is text-only
        ({"dataset": "pics-pairs", "model_size": "4b", "method": "dpo"}, "--method dpo trains on text only"),
        (
            {"dataset": "pics-prompts", "model_size": "4b", "method": "grpo", "rewards": ["exact_match"]},
            "--method grpo trains on text only",
        ),
        (
            {"dataset": "pics", "model_size": "tiny-gemma3mm", "processes": 2, "strategy": "fsdp"},
            "strategy fsdp cannot train them yet",
        ),
    ],
)
def test_the_plan_refuses_images_as_the_start_does(provider, config: dict[str, Any], expected: str) -> None:  # type: ignore[no-untyped-def]
    planned, started = _refusals(provider, config)
    assert isinstance(planned, UsageError) and expected in planned.message
    assert (type(planned), planned.message, planned.hint) == (type(started), started.message, started.hint)


def test_an_unknown_loss_type_is_refused_before_anything_naming_the_known_ones(provider) -> None:  # type: ignore[no-untyped-def]
    config = {"dataset": "word-pairs", "method": "dpo", "dpo_loss_type": ["sigmoid", "nosuch"]}
    planned, started = _refusals(provider, config)
    assert planned.message == started.message
    assert "dpo_loss_type: unknown loss type 'nosuch'" in started.message
    assert "sigmoid" in started.message and "ipo" in started.message and "sigmoid_norm" in started.message
    # Every name trl knows still passes the check (no run is started here, only checked).
    for known in ("ipo", "hinge", "apo_zero", "sft"):
        assert check_request(provider, {**config, "dpo_loss_type": [known]}).config.dpo_loss_type == [known]


@pytest.mark.parametrize(
    ("field", "method", "value", "expected"),
    [
        ("dpo_beta", "dpo", float("nan"), "dpo_beta: nan is not a number"),
        ("dpo_beta", "dpo", float("inf"), "dpo_beta: inf is not a finite number"),
        ("temperature", "grpo", float("nan"), "temperature: nan is not a number"),
        ("kl_coef", "grpo", float("nan"), "kl_coef: nan is not a number"),
        ("kl_coef", "grpo", float("-inf"), "kl_coef: -inf is not a finite number"),
        ("reward_timeout_s", "grpo", float("nan"), "reward_timeout_s: nan is not a number"),
        ("reward_timeout_s", "grpo", "NaN", "reward_timeout_s: 'NaN' is not a number"),
        ("learning_rate", "sft", float("nan"), "learning_rate: nan is not a number"),
        ("epochs", "sft", float("inf"), "epochs: inf is not a finite number"),
        ("lora_dropout", "dpo", float("nan"), "lora_dropout: nan is not a number"),
    ],
)
def test_a_number_that_is_not_one_is_named_so(provider, field: str, method: str, value: Any, expected: str) -> None:  # type: ignore[no-untyped-def]
    dataset = {"sft": "words", "dpo": "word-pairs", "grpo": "pics-prompts"}[method]
    config: dict[str, Any] = {"dataset": dataset, "method": method, field: value}
    if method == "grpo":
        config["rewards"] = ["exact_match"]
    planned, started = _refusals(provider, config)
    assert isinstance(started, UsageError) and expected in started.message, started.message
    assert "less than" not in started.message and "greater than" not in started.message
    assert planned.message == started.message


def test_a_negative_number_still_gets_its_bound(provider) -> None:  # type: ignore[no-untyped-def]
    planned, started = _refusals(provider, {"dataset": "word-pairs", "method": "dpo", "dpo_beta": -1.0})
    assert "dpo_beta: Input should be greater than 0" in started.message and planned.message == started.message


@pytest.mark.parametrize("method", ["sft", "dpo", "grpo"])
def test_a_missing_dataset_is_missing_whatever_the_method(provider, method: str) -> None:  # type: ignore[no-untyped-def]
    config: dict[str, Any] = {"dataset": "pairs", "method": method}
    if method == "grpo":
        config["rewards"] = ["exact_match"]
    planned, started = _refusals(provider, config)
    for error in (planned, started):
        assert isinstance(error, NotFoundError), error
        assert error.message.startswith("no dataset 'pairs'") and "never synced" in error.message
        assert "format" not in error.message
    assert planned.message == started.message


def test_the_datasets_found_are_listed_once(provider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A user's copy of the shipped demo (what `trainkit demo` leaves) next to the shipped one.
    _dataset(tmp_path / "datasets", "demo", "chat", [{"messages": [{"role": "user", "content": "x"}]}])
    with pytest.raises(NotFoundError) as err:
        find_local(tmp_path / "datasets", "pairs")
    found = err.value.message.split("(found: ", 1)[1].rstrip(")").split(", ")
    assert sorted(found) == sorted(set(found)) and "demo" in found and "words" in found


def test_thinking_for_a_format_without_it_is_refused_at_its_line_unless_dropped(provider) -> None:  # type: ignore[no-untyped-def]
    planned, started = _refusals(provider, {"dataset": "thoughts"})  # tiny speaks Gemma 3
    assert isinstance(planned, UsageError) and "has thinking (train.jsonl:2)" in planned.message
    assert "gemma3 chat format" in planned.message and "--drop-thinking" in (planned.hint or "")
    assert (planned.message, planned.hint) == (started.message, started.hint)
    assert check_request(provider, {"dataset": "thoughts", "keep_thinking": False}).config.keep_thinking is False
