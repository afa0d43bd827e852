"""`make_plan`: examples, epochs, steps, tokens (exact or labelled estimate), duration, cost.

Torch-free: the 4b preset's tokenizer is never on this machine, so its tokens are an
estimate, and says so. (The exact count with the tiny tokenizer is checked where the
training stack is: tests/e2e.) A test price table and seeded earlier runs stand for
real prices and measured throughput.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.ids import new_run_id
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import Settings
from trainkit_core.training.plan import load_throughput, make_plan


@pytest.fixture
def provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    folder = tmp_path / "datasets" / "qa"
    folder.mkdir(parents=True)
    (folder / "dataset.toml").write_text('name = "qa"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    lines = [
        json.dumps(
            {"messages": [{"role": "user", "content": f"q{i} " * 10}, {"role": "assistant", "content": "a " * 20}]}
        )
        for i in range(50)
    ]
    (folder / "train.jsonl").write_text("\n".join(lines) + "\n")
    prices = tmp_path / "prices.toml"
    prices.write_text("[local.gpus]\nA10G = 2.0\n")
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(tmp_path / "datasets"))
    monkeypatch.setenv("TRAINKIT_PRICES_FILE", str(prices))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: no tokenizer of a real model
    local = get_provider("local", Settings.from_env())
    # Stands for a provider with GPUs: the local one plans a GPU preset on this machine's CPU.
    gpus = dataclasses.replace(local.manifest.capabilities, gpu=True)
    local.manifest = dataclasses.replace(local.manifest, capabilities=gpus)
    return local


def test_a_plan_without_the_models_tokenizer_labels_its_tokens_an_estimate(provider) -> None:  # type: ignore[no-untyped-def]
    plan = make_plan(provider, {"dataset": "qa", "model_size": "4b", "epochs": 2})
    assert plan.tokens_exact is False and plan.tokens_method == "4 characters per token"
    assert any("(estimate: 4 characters per token)" in line for line in plan.lines())
    # 50 examples, batch 2 x 4: 7 steps an epoch, 14 for two.
    assert (plan.examples, plan.steps_per_epoch, plan.steps, plan.epochs) == (50, 7, 14, 2.0)
    assert plan.gpu == "A10G" and plan.usd_per_hour == 2.0
    table = load_throughput()["presets"]["4b"]
    assert plan.tokens_per_s == table["A10G"] and "throughput table" in plan.throughput_source
    expected = table["startup_s"] + plan.tokens_total / table["A10G"]
    assert plan.estimated_seconds == pytest.approx(expected, abs=0.1)
    assert plan.estimated_cost_usd == pytest.approx(expected / 3600 * 2.0, abs=1e-4)


def test_steps_win_over_the_presets_length_and_say_how_many_epochs_they_are(provider) -> None:  # type: ignore[no-untyped-def]
    plan = make_plan(provider, {"dataset": "qa", "model_size": "4b", "steps": 21})
    assert (plan.steps, plan.epochs) == (21, 3.0)
    assert plan.tokens_total == plan.tokens_per_epoch * 3


def test_measured_throughput_of_earlier_runs_refines_the_table(provider) -> None:  # type: ignore[no-untyped-def]
    store = RunStore.for_provider(provider)
    for rate in (100.0, 300.0, 200.0):
        run = TrainingRun(
            id=new_run_id(),
            created_at=time.time(),
            status="succeeded",
            config={"model_size": "4b", "gpu": "A10G"},
            metrics={"tokens_per_s": rate},
        )
        run.attach(store).save()
    other = TrainingRun(
        id=new_run_id(), status="succeeded", config={"model_size": "4b", "gpu": "A100"}, metrics={"tokens_per_s": 9e9}
    )
    other.attach(store).save()
    plan = make_plan(provider, {"dataset": "qa", "model_size": "4b"})
    assert plan.tokens_per_s == 200.0 and plan.throughput_source == "median of 3 earlier 4b sft run(s) on A10G"
    startup = load_throughput()["presets"]["4b"]["startup_s"]
    assert plan.estimated_seconds == pytest.approx(startup + plan.tokens_total / 200.0, abs=0.1)
    assert math.isclose(plan.epochs, plan.steps / plan.steps_per_epoch, rel_tol=1e-3)


def _prompts(tmp_path: Path, name: str, extra: dict[str, str]) -> None:
    folder = tmp_path / "datasets" / name
    folder.mkdir()
    (folder / "dataset.toml").write_text(f'name = "{name}"\nformat = "prompt"\ntrain = ["train.jsonl"]\n')
    lines = [json.dumps({"messages": [{"role": "user", "content": f"question {i}"}], **extra}) for i in range(40)]
    (folder / "train.jsonl").write_text("\n".join(lines) + "\n")


def test_a_grpo_plan_is_measured_by_earlier_grpo_runs_before_runs_of_other_methods(provider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A GRPO run's tokens/s holds its generation; an SFT run's needs the plan's assumed work on top."""
    _prompts(tmp_path, "prompts", {"reference": "an answer"})
    store = RunStore.for_provider(provider)

    def seed(method: str | None, rate: float) -> None:
        config = {"model_size": "4b", "gpu": "A10G", **({"method": method} if method else {})}
        run = TrainingRun(id=new_run_id(), status="succeeded", config=config, metrics={"tokens_per_s": rate})
        run.attach(store).save()

    config = {"dataset": "prompts", "model_size": "4b", "method": "grpo", "rewards": ["exact_match"], "steps": 10}
    seed(None, 1000.0)  # an SFT run from before methods were recorded
    seed("dpo", 1000.0)
    by_others = make_plan(provider, config)
    assert by_others.throughput_source == "median of 2 earlier 4b run(s) of other methods on A10G"
    startup = load_throughput()["presets"]["4b"]["startup_s"]
    assumed = (by_others.estimated_seconds - startup) * 1000.0 / by_others.tokens_total
    assert assumed > 1.5  # GRPO's generation, assumed to cost more than training on the tokens

    seed("grpo", 250.0)
    by_own = make_plan(provider, config)
    assert by_own.tokens_per_s == 250.0 and by_own.throughput_source == "median of 1 earlier 4b grpo run(s) on A10G"
    assert by_own.estimated_seconds == pytest.approx(startup + by_own.tokens_total / 250.0, abs=0.1)
    assert make_plan(provider, {"dataset": "qa", "model_size": "4b"}).tokens_per_s == 1000.0  # SFT: its own runs


def test_a_grpo_plan_expects_completions_as_long_as_the_references(provider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Completions end at the end of turn: the limit is the guess only for lines without a reference."""
    reference = "the answer, in about forty characters here"
    for name, extra in (("ref-prompts", {"reference": reference}), ("bare-prompts", {})):
        _prompts(tmp_path, name, extra)
    config = {"model_size": "4b", "method": "grpo", "rewards": ["exact_match"], "steps": 10}
    with_reference = make_plan(provider, {**config, "dataset": "ref-prompts"})
    bare = make_plan(provider, {**config, "dataset": "bare-prompts"})
    expected = math.ceil(len(reference) / 4) + 1  # tokens at 4 characters each, and the end of turn
    assert any(f"of about {expected} tokens (the length of the lines' references" in n for n in with_reference.notes)
    assert any("of about 256 tokens (max_completion_length: the lines have no reference)" in n for n in bare.notes)
    assert with_reference.tokens_total < bare.tokens_total
    assert with_reference.estimated_seconds < bare.estimated_seconds
