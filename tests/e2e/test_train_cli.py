"""End to end from the CLI on the `local` provider: train, follow, stop, kill -9, resume.

Each scenario is one real run of the tiny model in a detached job process; the
assertions of a scenario share its run. The stop and kill runs use a tiny dataset
without an eval split (no post-training eval) and a huge step count, so they are
still running when the test acts on them; resume then trains a few steps only.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_env import Env

from trainkit_core.runs.training_run import TrainingRun

# Generous: each scenario takes well under a minute on 2 idle cores, but a shared,
# loaded machine can be ten times slower.
pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _progress(run: TrainingRun) -> list[dict[str, Any]]:
    return [e for e in run.events.read() if e["type"] == "progress"]


def _step_losses(events: list[dict[str, Any]]) -> dict[int, float]:
    return {int(step): loss for e in events if e["type"] == "progress" for step, loss in e["losses"]}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    datasets = tmp_path_factory.mktemp("datasets")
    for name in ("demo",):
        (datasets / name).symlink_to(REPO / "datasets" / name)
    mini = datasets / "mini"
    mini.mkdir()
    (mini / "dataset.toml").write_text('name = "mini"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    words = ["red", "blue", "green", "cat", "dog", "sun", "moon", "tree"]
    lines = [
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"Uppercase: {a} {b}"},
                    {"role": "assistant", "content": f"{a} {b}".upper()},
                ]
            }
        )
        for a, b in zip(words, reversed(words), strict=True)
    ]
    (mini / "train.jsonl").write_text("\n".join(lines) + "\n")
    return Env(tmp_path_factory.mktemp("home"), datasets)


# --------------------------------------------------------------------------- the demo run


@pytest.fixture(scope="module")
def demo(env: Env) -> dict[str, Any]:
    """`trainkit train` on the demo dataset, with a second process following its logs."""
    trainer = env.popen("train", "--dataset", "demo", "--model-size", "tiny", "--steps", "120", "--save-every", "60")
    run_id = _wait_for(lambda: [r.id for r in env.store.list()], 120, "the run record")[0]
    follower = env.popen("runs", "logs", run_id, "--follow", "--json")
    arrivals: list[tuple[float, dict[str, Any]]] = []

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            arrivals.append((time.time(), json.loads(line)))

    reader = threading.Thread(target=read)
    reader.start()
    out, err = trainer.communicate(timeout=1500)
    follower.wait(timeout=120)
    reader.join(timeout=30)
    return {"run": env.run(run_id), "code": trainer.returncode, "out": out, "err": err, "arrivals": arrivals}


def test_demo_trains_and_the_loss_falls_below_half(demo: dict[str, Any]) -> None:
    run = demo["run"]
    assert demo["code"] == 0, demo["err"]
    assert run.status == "succeeded", run.error_message
    assert f"run {run.id}: succeeded" in demo["out"]
    progress = _progress(run)
    assert progress[0]["step"] == 1 and progress[-1]["step"] == 120
    assert progress[-1]["loss"] < progress[0]["loss"] / 2
    assert run.metrics["final_loss"] < run.metrics["first_loss"] / 2
    assert all(e["tokens_per_s"] and e["memory_mb"] for e in progress[1:])
    phases = [e["phase"] for e in run.events.read() if e["type"] == "phase"]
    assert phases[:3] == ["loading_model", "loading_dataset", "training"] and phases[-1] == "done"
    assert [c.step for c in run.checkpoints()] == [60, 120]
    assert run.model.path == f"trained/{run.id}"


def test_plan_on_the_demo_counts_exactly_the_tokens_the_run_trained_on(env: Env, demo: dict[str, Any]) -> None:
    assert "plan: trainkit/tiny-gemma" in demo["err"]
    before = len(env.store.list())
    done = env.cli("train", "--dataset", "demo", "--model-size", "tiny", "--steps", "120", "--plan", "--json")
    plan = json.loads(done.stdout)
    tokenized = demo["run"].substep_times["loading_dataset"]["tokenize"]
    assert plan["tokens_exact"] is True and plan["tokens_per_epoch"] == tokenized["tokens"]
    assert plan["examples"] == tokenized["examples"] and plan["steps"] == 120
    text = env.cli("train", "--dataset", "demo", "--model-size", "tiny", "--plan").stdout
    assert f"{tokenized['tokens']:,} tokens per epoch (exact, the tiny model's tokenizer" in text
    # The plan printed before the start counts the same way.
    assert f"{tokenized['tokens']:,} tokens per epoch (exact, the tiny model's tokenizer" in demo["err"]
    assert len(env.store.list()) == before  # a plan starts nothing


def test_a_second_process_following_the_logs_sees_events_while_the_run_runs(demo: dict[str, Any]) -> None:
    run, arrivals = demo["run"], demo["arrivals"]
    seen_running = [event for at, event in arrivals if event["type"] == "progress" and at < run.ended_at]
    assert len(seen_running) >= 2
    assert arrivals[-1][1]["type"] == "status" and arrivals[-1][1]["status"] == "succeeded"
    seqs = [event["seq"] for _, event in arrivals]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))


def test_trained_dir_holds_a_loadable_adapter_and_its_description(env: Env, demo: dict[str, Any]) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainkit_core.models.chat_format import encode_for_training, get_format
    from trainkit_core.models.trained.layout import resolve_base_model

    run = demo["run"]
    models = Path(env.provider.volume("models").root)  # type: ignore[attr-defined]
    out = models / "trained" / run.id
    for name in ("adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "trained_model.json"):
        assert (out / name).is_file(), name
    card = json.loads((out / "trained_model.json").read_text())
    assert card["run_id"] == run.id and card["preset"] == "tiny" and card["chat_format"] == "gemma3"
    assert card["dataset_id"] == "demo" and card["dataset_hash"] == run.dataset_hash
    assert card["config"]["steps"] == 120 and {"torch", "transformers", "peft"} <= set(card["versions"])
    hf_cache = Path(env.provider.volume("hf-cache").root)  # type: ignore[attr-defined]
    base = AutoModelForCausalLM.from_pretrained(resolve_base_model(card, hf_cache))
    tokenizer = AutoTokenizer.from_pretrained(out)
    lines = (REPO / "datasets" / "demo" / "train.jsonl").read_text().splitlines()[:32]
    encoded = [
        encode_for_training(tokenizer, json.loads(line)["messages"], get_format(card["chat_format"])) for line in lines
    ]

    def mean_loss(model: Any) -> float:
        losses = []
        for e in encoded:
            ids, labels = torch.tensor([e["input_ids"]]), torch.tensor([e["labels"]])
            losses.append(model(input_ids=ids, labels=labels).loss.item())
        return sum(losses) / len(losses)

    with torch.no_grad():
        base_loss = mean_loss(base)
        tuned_loss = mean_loss(PeftModel.from_pretrained(base, out).eval())
    assert tuned_loss < base_loss / 2  # the adapter loaded from disk is the trained one
    assert run.latest_rollout is not None and run.latest_rollout["step"] == 120  # samples at each checkpoint
    assert len(run.latest_rollout["samples"]) == 2


# --------------------------------------------------------------------------- stop


def test_runs_stop_mid_run_ends_stopped_with_an_adapter_and_a_checkpoint(env: Env) -> None:
    started = env.cli(
        "train", "--dataset", "mini", "--steps", "100000", "--save-every", "1000", "--batch-size", "4", "--detach"
    )
    run_id = started.stdout.strip().splitlines()[-1]
    run = env.run(run_id)
    _wait_for(lambda: any(e["step"] >= 3 for e in _progress(run)), 900, "step 3")
    stopped = env.cli("runs", "stop", run_id, "--wait", "--json", timeout=900)
    record = json.loads(stopped.stdout)
    assert record["status"] == "stopped"
    run.reload()
    assert 3 <= run.step < 100000
    models = Path(env.provider.volume("models").root)  # type: ignore[attr-defined]
    assert (models / "trained" / run_id / "adapter_model.safetensors").is_file()
    assert (models / "trained" / run_id / "trained_model.json").is_file()
    assert [c.step for c in run.checkpoints()] == [run.step]  # saved at the stop, so it can be resumed
    listed = json.loads(env.cli("runs", "list", "--json").stdout)
    assert {"id": run_id, "status": "stopped"}.items() <= next(r for r in listed if r["id"] == run_id).items()


# --------------------------------------------------------------------------- kill -9, reconcile, resume


def test_kill_9_fails_the_run_and_resume_continues_from_the_checkpoint(env: Env) -> None:
    # A constant rate: resuming to another --steps gives a decaying schedule another length,
    # and this test compares losses across the resume (optimizer, RNG and data order restored).
    started = env.cli(
        "train",
        "--dataset",
        "mini",
        "--steps",
        "100000",
        "--save-every",
        "20",
        "--batch-size",
        "4",
        "--lr-scheduler",
        "constant",
        "--detach",
    )
    run_id = started.stdout.strip().splitlines()[-1]
    run = env.run(run_id)

    def past_a_checkpoint() -> bool:
        latest = run.latest_checkpoint()
        return latest is not None and any(e["step"] >= latest.step + 3 for e in _progress(run))

    _wait_for(past_a_checkpoint, 900, "two steps past the first checkpoint")
    run.reload()
    pid = env.provider.call(run.call_id).pid  # type: ignore[attr-defined]
    os.kill(pid, signal.SIGKILL)

    waited = env.cli("runs", "wait", run_id, "--json", check=False, timeout=120)
    assert waited.returncode == 1
    failed = json.loads(waited.stdout)
    assert failed["status"] == "failed"
    assert "SIGKILL" in failed["error_message"]
    before = run.events.read()
    checkpoint = run.latest_checkpoint()
    assert checkpoint is not None
    target = checkpoint.step + 6

    resumed = env.cli("runs", "resume", run_id, "--steps", str(target), "--json", timeout=600)
    record = json.loads(resumed.stdout)
    assert record["status"] == "succeeded", record["error_message"]
    assert record["step"] == target and record["error_message"] is None and record["attempt"] == 2
    after = run.events.read(before[-1]["seq"])
    assert any(e.get("message", "").startswith(f"resuming from checkpoint at step {checkpoint.step}") for e in after)
    resumed_losses = _step_losses(after)
    assert min(resumed_losses) == checkpoint.step + 1 and max(resumed_losses) == target
    # The killed attempt trained past the checkpoint; the resumed one retrained those steps.
    # With the optimizer, scheduler, RNG and data order restored, the losses are the same.
    overlap = sorted(set(_step_losses(before)) & set(resumed_losses))
    assert [s for s in overlap if s >= checkpoint.step + 2], (
        "the killed attempt never got two steps past its checkpoint"
    )
    for step in overlap:
        assert resumed_losses[step] == pytest.approx(_step_losses(before)[step], abs=1e-4), step
    assert [c.step for c in run.checkpoints()][-1] == target


# --------------------------------------------------------------------------- sweep


def test_sweep_starts_a_group_and_prints_a_comparison(env: Env) -> None:
    done = env.cli(
        "sweep", "--dataset", "mini", "--steps", "4", "--batch-size", "4", "--grid", "lr=1e-3,1e-2", "--json"
    )
    result = json.loads(done.stdout)
    rows = result["runs"]
    assert len(rows) == 2 and {row["status"] for row in rows} == {"succeeded"}
    assert sorted(row["params"]["learning_rate"] for row in rows) == ["1e-2", "1e-3"]
    assert rows[0]["final_loss"] <= rows[1]["final_loss"]  # best first
    listed = json.loads(env.cli("runs", "list", "--group", result["group_id"], "--json").stdout)
    assert sorted(r["id"] for r in listed) == sorted(row["run_id"] for row in rows)
    table = env.cli("sweep", "--dataset", "mini", "--grid", "lora_rr=4", check=False)
    assert table.returncode == 2 and "did you mean 'lora_r'" in table.stderr
