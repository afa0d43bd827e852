"""OpenAI fine-tuning jobs end to end with the official `openai` SDK: the code a team wrote for OpenAI, pointed at trainkit.

A real server on 127.0.0.1, the `local` provider, the `tiny` model. Upload OpenAI-format
files, create a supervised job, follow it with `retrieve` and `list_events` to `succeeded`,
list its checkpoints, chat with `fine_tuned_model` and a checkpoint's name, read the
results file; then a DPO job and a reinforcement job (a `string_check` grader on the
line's own `reference_answer`) that start from the supervised job's model; pause and
resume; cancel.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from api_helpers import ml_settings, serve

from trainkit_core.training.config import TrainConfig

pytestmark = [pytest.mark.ml, pytest.mark.e2e]


DATA = Path(__file__).resolve().parents[2] / "packages/trainkit-core/src/trainkit_core/data/datasets"
ENDED = ("succeeded", "failed", "cancelled")


def _lines(path: Path, count: int, start: int = 0) -> bytes:
    return ("\n".join(path.read_text().splitlines()[start : start + count]) + "\n").encode()


def _upload(client: Any, data: bytes, name: str) -> str:
    return str(client.files.create(file=(name, io.BytesIO(data)), purpose="fine-tune").id)


def _wait(client: Any, job_id: str, until: tuple[str, ...] = ENDED, timeout: float = 600) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        job = client.fine_tuning.jobs.retrieve(job_id)
        if job.status in until:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job.status}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    home, datasets = tmp_path_factory.mktemp("ft-home"), tmp_path_factory.mktemp("ft-datasets")
    # This server allows python graders (TRAINKIT_ALLOW_PYTHON_GRADERS); test_fine_tuning_files' does not.
    yield from serve(ml_settings(home, datasets, idle_s=30, allow_python_graders=True))


@pytest.fixture(scope="module")
def client(served: Any) -> Any:
    return openai.OpenAI(base_url=served.url + "/v1", api_key=served.token, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def supervised(client: Any) -> Any:
    """A supervised job on 400 of the demo's conversations, 20 held out; followed to its end."""
    train = _upload(client, _lines(DATA / "demo/train.jsonl", 400), "opposites.jsonl")
    valid = _upload(client, _lines(DATA / "demo/eval.jsonl", 20), "opposites-valid.jsonl")
    job = client.fine_tuning.jobs.create(
        model="tiny",
        training_file=train,
        validation_file=valid,
        suffix="opposites",
        seed=3,
        metadata={"team": "search"},
        method={
            "type": "supervised",
            "supervised": {"hyperparameters": {"n_epochs": 2, "batch_size": 8, "learning_rate_multiplier": 2}},
        },
    )
    assert job.object == "fine_tuning.job" and job.status in ("queued", "running")
    assert job.fine_tuned_model is None and job.training_file == train and job.validation_file == valid
    assert job.estimated_finish is not None and job.estimated_finish >= job.created_at  # from the plan
    seen = {job.status}
    deadline = time.monotonic() + 600
    while job.status not in ENDED:
        assert time.monotonic() < deadline, job
        time.sleep(0.3)
        job = client.fine_tuning.jobs.retrieve(job.id)
        seen.add(job.status)
    assert job.status == "succeeded", job.error
    return job, seen


def test_a_supervised_job_runs_to_succeeded_with_what_was_asked(supervised: Any, served: Any) -> None:
    job, seen = supervised
    assert "running" in seen
    assert job.fine_tuned_model == f"ft:tiny:opposites:{job.id}"
    assert job.hyperparameters.batch_size == 8 and job.hyperparameters.n_epochs == 2
    assert job.hyperparameters.learning_rate_multiplier == pytest.approx(2.0)
    assert job.seed == 3 and job.metadata == {"team": "search"} and job.method.type == "supervised"
    assert job.trained_tokens and job.trained_tokens > 1000 and job.finished_at >= job.created_at
    assert job.error is None and job.estimated_finish is None

    # The job is a trainkit run: the same id, the same record, the CLI's `runs show` shows it.
    run = served.store.get(job.id)
    assert run.status == "succeeded" and run.config["epochs"] == 2 and run.config["batch_size"] == 8
    default = TrainConfig(dataset="x", model_size="tiny").resolve().learning_rate
    assert run.config["learning_rate"] == pytest.approx(2 * default)


def test_events_are_openai_events_newest_first_and_page_backwards(client: Any, supervised: Any) -> None:
    job, _ = supervised
    events = list(client.fine_tuning.jobs.list_events(job.id, limit=5))  # every page, through `after`
    assert all(e.object == "fine_tuning.job.event" for e in events)
    numbers = [int(e.id.rsplit("-", 1)[1]) for e in events]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == len(numbers) and numbers[-1] == 1
    metrics = [e for e in events if e.type == "metrics"]
    assert metrics and all(e.data["step"] >= 1 and e.data["train_loss"] > 0 for e in metrics)
    assert events[0].message.startswith("Job status: succeeded") or any(
        e.message.startswith("Job status: succeeded") for e in events[:5]
    )
    first_page = client.fine_tuning.jobs.list_events(job.id, limit=5)
    assert len(first_page.data) == 5 and first_page.has_more


def test_checkpoints_and_the_fine_tuned_model_answer_chat_completions(client: Any, supervised: Any) -> None:
    job, _ = supervised
    checkpoints = client.fine_tuning.jobs.checkpoints.list(job.id).data
    assert checkpoints, "save_every 50 over 100 steps writes checkpoints"
    steps = [c.step_number for c in checkpoints]
    assert steps == sorted(steps, reverse=True)
    for checkpoint in checkpoints:
        assert checkpoint.fine_tuning_job_id == job.id and checkpoint.metrics.step == checkpoint.step_number
        assert checkpoint.fine_tuned_model_checkpoint == f"{job.fine_tuned_model}:ckpt-step-{checkpoint.step_number}"
        assert checkpoint.metrics.train_loss is not None

    for model in (job.fine_tuned_model, checkpoints[-1].fine_tuned_model_checkpoint):
        completion = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Opposites: hot early"}], max_tokens=12
        )
        assert completion.model == model and completion.choices[0].message.content
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model=f"ft:tiny:other-suffix:{job.id}", messages=[{"role": "user", "content": "hi"}], max_tokens=4
        )


def test_the_results_file_is_a_metrics_csv(client: Any, supervised: Any) -> None:
    job, _ = supervised
    [results] = job.result_files
    assert client.files.retrieve(results).purpose == "fine-tune-results"
    rows = list(csv.DictReader(io.StringIO(client.files.content(results).text)))
    assert rows and list(rows[0]) == ["step", "train_loss", "train_accuracy", "valid_loss", "valid_mean_token_accuracy"]
    assert all(float(r["train_loss"]) > 0 for r in rows) and int(rows[-1]["step"]) == 100


def test_jobs_list_filters_by_metadata(client: Any, supervised: Any) -> None:
    job, _ = supervised
    assert job.id in [j.id for j in client.fine_tuning.jobs.list(metadata={"team": "search"})]
    assert job.id not in [j.id for j in client.fine_tuning.jobs.list(metadata={"team": "ads"})]


def test_models_know_the_fine_tuned_name(client: Any, supervised: Any) -> None:
    job, _ = supervised
    listed = {m.id: m for m in client.models.list()}
    assert listed[f"trained/{job.id}"].model_extra["fine_tuned_model"] == job.fine_tuned_model
    model = client.models.retrieve(job.fine_tuned_model)
    assert model.id == job.fine_tuned_model and model.model_extra["run_id"] == job.id
    assert client.models.retrieve(f"trained/{job.id}").id == f"trained/{job.id}"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("ft:tiny:opposites:run-20260101-000000-abcdef")


def test_dpo_then_reinforcement_start_from_the_supervised_model(client: Any, supervised: Any, served: Any) -> None:
    job, _ = supervised
    # OpenAI's DPO lines may declare tools in their input (the prompts are rendered with them),
    # and a preferred answer may be a call (written in the chat format's call syntax).
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    call = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
    }
    lines = [json.loads(line) for line in _lines(DATA / "demo-prefs/train.jsonl", 200).decode().splitlines()]
    declared = b"".join(
        json.dumps(
            {**line, "input": {**line["input"], "tools": tools}, **({"preferred_output": [call]} if i % 4 == 0 else {})}
        ).encode()
        + b"\n"
        for i, line in enumerate(lines)
    )
    pairs = _upload(client, declared, "prefs.jsonl")
    dpo = client.fine_tuning.jobs.create(
        model=job.fine_tuned_model,
        training_file=pairs,
        method={"type": "dpo", "dpo": {"hyperparameters": {"beta": 0.2, "n_epochs": 1, "batch_size": 8}}},
    )
    dpo = _wait(client, dpo.id)
    assert dpo.status == "succeeded", dpo.error
    assert dpo.method.type == "dpo" and dpo.hyperparameters.model_extra["beta"] == pytest.approx(0.2)
    assert dpo.model == job.fine_tuned_model and dpo.fine_tuned_model == f"ft:tiny::{dpo.id}"  # named after the base

    # OpenAI's reinforcement data: the answer in a field of the line's own choosing.
    prompts = [json.loads(line) for line in _lines(DATA / "demo-prompts/train.jsonl", 16).decode().splitlines()]
    rft = b"".join(
        json.dumps({"messages": p["messages"], "reference_answer": p["reference"]}).encode() + b"\n" for p in prompts
    )
    grader = {
        "type": "string_check",
        "name": "matches",
        "input": "{{sample.output_text}}",
        "reference": "{{item.reference_answer}}",
        "operation": "eq",
    }
    rft_file = _upload(client, rft, "rft.jsonl")

    def reinforce(with_grader: dict[str, Any]) -> Any:
        method = {"type": "reinforcement", "reinforcement": {"grader": with_grader, "hyperparameters": {"n_epochs": 1}}}
        done = _wait(
            client, client.fine_tuning.jobs.create(model=dpo.fine_tuned_model, training_file=rft_file, method=method).id
        )
        assert done.status == "succeeded", done.error
        return done

    reinforcement = reinforce(grader)
    assert reinforcement.method.reinforcement.grader.type == "string_check"
    rewards = [e.data for e in client.fine_tuning.jobs.list_events(reinforcement.id) if e.type == "metrics"]
    assert rewards, "a reinforcement job logs its steps"

    # A python grader, where the server allows them: the caller's code, run in the training job only.
    python = {
        "type": "python",
        "name": "ends_with_stop",
        "source": "def grade(sample, item):\n    return 1.0 if sample['output_text'].endswith('.') else 0.0\n",
    }
    assert client.fine_tuning.alpha.graders.validate(grader=python).grader.type == "python"
    with pytest.raises(openai.BadRequestError, match="only inside a training job"):
        client.fine_tuning.alpha.graders.run(grader=python, model_sample="x.", item={})
    coded = reinforce(python)
    samples = (served.store.get(coded.id).latest_rollout or {}).get("samples", [])
    assert samples and all(s["rewards"]["ends_with_stop"] == float(s["completion"].endswith(".")) for s in samples)


def test_pause_resume_and_cancel(client: Any, served: Any) -> None:
    train = _upload(client, _lines(DATA / "demo/train.jsonl", 400, start=400), "more.jsonl")
    # 250 steps: long enough that a pause sent at step 3 lands mid-run on a loaded machine.
    body = {"model": "tiny", "training_file": train, "hyperparameters": {"n_epochs": 5, "batch_size": 8}}
    job = client.fine_tuning.jobs.create(**body)
    deadline = time.monotonic() + 300
    while served.store.get(job.id).step < 3:
        assert time.monotonic() < deadline and client.fine_tuning.jobs.retrieve(job.id).status not in ENDED
        time.sleep(0.2)
    client.fine_tuning.jobs.pause(job.id)
    paused = _wait(client, job.id, until=("paused", *ENDED))
    assert paused.status == "paused" and paused.fine_tuned_model is None
    with pytest.raises(openai.ConflictError):
        client.fine_tuning.jobs.pause(job.id)

    resumed = client.fine_tuning.jobs.resume(job.id)
    assert resumed.id == job.id and resumed.status in ("queued", "running")
    done = _wait(client, job.id)
    assert done.status == "succeeded" and served.store.get(job.id).step == 250
    with pytest.raises(openai.ConflictError):
        client.fine_tuning.jobs.resume(job.id)

    doomed = client.fine_tuning.jobs.create(**body)
    cancelled = client.fine_tuning.jobs.cancel(doomed.id)
    assert cancelled.status == "cancelled" and cancelled.fine_tuned_model is None
    assert client.fine_tuning.jobs.retrieve(doomed.id).status == "cancelled"
    with pytest.raises(openai.ConflictError):
        client.fine_tuning.jobs.cancel(doomed.id)
