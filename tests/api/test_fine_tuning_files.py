"""OpenAI's `files` API and the refusals of `fine_tuning.jobs.create`, through the official `openai` SDK.

Against a real server on 127.0.0.1 with the `local` provider. Nothing here trains: every
job below is refused before a run exists, and each refusal must reach the SDK as the
exception class OpenAI's own server would cause (400 `BadRequestError` with `param` and
`code`, 404 `NotFoundError`), leaving no file, dataset or run behind.
"""

from __future__ import annotations

import io
import json
from typing import Any

import openai
import pytest

CHAT = {
    "messages": [
        {"role": "system", "content": "Answer in capitals."},
        {"role": "user", "content": "Uppercase: red fox"},
        {"role": "assistant", "content": "RED FOX"},
    ]
}
PAIR = {
    "input": {"messages": [{"role": "user", "content": "Opposites: hot"}]},
    "preferred_output": [{"role": "assistant", "content": "cold."}],
    "non_preferred_output": [{"role": "assistant", "content": "cold"}],
}
PROMPT = {"messages": [{"role": "user", "content": "Opposites: hot"}], "reference_answer": "cold"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}


def _jsonl(*lines: Any) -> bytes:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=server.token, max_retries=0, timeout=60)


def _upload(client: Any, data: bytes, name: str = "train.jsonl", purpose: str = "fine-tune") -> Any:
    return client.files.create(file=(name, io.BytesIO(data)), purpose=purpose)


def test_an_uploaded_file_is_listed_retrieved_read_back_and_deleted(client: Any, server: Any) -> None:
    data = _jsonl(CHAT, {**CHAT, "messages": [*CHAT["messages"][1:2], {"role": "assistant", "content": "RED FOX!"}]})
    uploaded = _upload(client, data, "my data.jsonl")
    assert uploaded.object == "file" and uploaded.purpose == "fine-tune" and uploaded.bytes == len(data)
    assert uploaded.id.startswith("file-") and uploaded.filename == "my data.jsonl"
    assert uploaded.model_extra["format"] == "chat"

    # The same bytes are the same file: the id is the content's.
    assert _upload(client, data, "again.jsonl").id == uploaded.id

    assert uploaded.id in [f.id for f in client.files.list()]
    assert client.files.retrieve(uploaded.id).bytes == len(data)
    assert client.files.content(uploaded.id).content == data

    # It is a trainkit dataset on the data volume, named by the id.
    volume = server.provider.volume("data")
    assert volume.exists(f"datasets/{uploaded.id}/current.json")

    deleted = client.files.delete(uploaded.id)
    assert deleted.deleted is True and deleted.id == uploaded.id
    assert uploaded.id not in [f.id for f in client.files.list()]
    assert not volume.exists(f"datasets/{uploaded.id}")
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(uploaded.id)


def test_each_kind_of_openai_file_gets_its_format(client: Any) -> None:
    assert _upload(client, _jsonl(PAIR)).model_extra["format"] == "preference"
    assert _upload(client, _jsonl(PROMPT)).model_extra["format"] == "prompt"
    assert _upload(client, _jsonl({"prompt": "a", "completion": "b"})).model_extra["format"] == "prompt_completion"


def test_files_page_with_after_and_limit(client: Any) -> None:
    ids = {_upload(client, _jsonl(_chat(("user", "Uppercase: x"), ("assistant", f"X{i}")))).id for i in range(3)}
    first = client.files.list(limit=2)
    assert len(first.data) == 2 and first.has_more
    seen = [f.id for f in client.files.list(limit=2)]  # the SDK's auto-pagination follows `after`
    assert ids <= set(seen) and len(seen) == len(set(seen))


def _chat(*turns: tuple[str, Any], **extra: Any) -> dict[str, Any]:
    """A conversation of (role, content) turns; a dict content is the whole message."""
    return {**extra, "messages": [t[1] if isinstance(t[1], dict) else {"role": t[0], "content": t[1]} for t in turns]}


def _call(name: str, arguments: str) -> tuple[str, dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}
    return "assistant", {"role": "assistant", "tool_calls": [call]}


ANSWERED = (("tool", {"role": "tool", "tool_call_id": "c", "content": "r"}), ("assistant", "ok"))

#: OpenAI-format files broken in one way each: (what, the lines, the line at fault, a word of the reason).
MALFORMED = [
    ("not json", ["{oops"], 1, "invalid-json"),
    ("json array", [CHAT, "[1, 2]"], 2, "not-object"),
    ("no messages", [CHAT, {"text": "hi"}], 2, "messages"),
    ("messages not a list", [{"messages": "hi"}], 1, "messages-not-list"),
    ("unknown role", [_chat(("robot", "x"), ("assistant", "y"))], 1, "role"),
    ("empty content", [_chat(("user", ""), ("assistant", "y"))], 1, "content"),
    ("two user turns", [_chat(("user", "a"), ("user", "b"), ("assistant", "c"))], 1, "alternat"),
    (
        "weight 2",
        [CHAT, _chat(("user", "a"), ("assistant", {"role": "assistant", "content": "b", "weight": 2}))],
        2,
        "weight",
    ),
    (
        "nothing trained",
        [_chat(("user", "a"), ("assistant", {"role": "assistant", "content": "b", "weight": 0}))],
        1,
        "nothing-trained",
    ),
    ("NaN", [CHAT, '{"messages": [], "x": NaN}'], 2, "invalid-json"),
    ("duplicate key", ['{"messages": 1, "messages": 2}'], 1, "invalid-json"),
    ("undefined tool", [_chat(("user", "a"), _call("g", "{}"), *ANSWERED, tools=[TOOL])], 1, "tool-undefined"),
    ("arguments not json", [_chat(("user", "a"), _call("f", "{no"), *ANSWERED, tools=[TOOL])], 1, "tool-arguments"),
    ("orphan tool answer", [_chat(("user", "a"), *ANSWERED)], 1, "tool"),
    (
        "dpo side missing",
        [PAIR, {"input": PAIR["input"], "preferred_output": PAIR["preferred_output"]}],
        2,
        "non_preferred_output",
    ),
    ("dpo identical sides", [{**PAIR, "non_preferred_output": PAIR["preferred_output"]}], 1, "identical"),
    ("dpo two-message side", [{**PAIR, "preferred_output": PAIR["preferred_output"] * 2}], 1, "preferred_output"),
    (
        "rft two user turns",
        [PROMPT, PROMPT, _chat(("user", "a"), ("assistant", "b"), ("user", "c"), ("user", "d"))],
        3,
        "alternat",
    ),
]


@pytest.mark.parametrize(("what", "lines", "line", "reason"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_file_is_refused_at_its_line_and_nothing_is_kept(
    client: Any, server: Any, what: str, lines: list[Any], line: int, reason: str
) -> None:
    before = {f.id for f in client.files.list()}
    with pytest.raises(openai.BadRequestError) as caught:
        _upload(client, _jsonl(*lines), "broken.jsonl")
    error = caught.value.body
    assert error["param"] == "file" and error["code"] == "invalid_file", error
    assert f"broken.jsonl:{line}:" in error["message"], error["message"]
    assert reason in error["message"], error["message"]
    assert {f.id for f in client.files.list()} == before


def test_an_empty_file_and_another_purpose_are_refused(client: Any) -> None:
    with pytest.raises(openai.BadRequestError, match="empty"):
        _upload(client, b"\n\n")
    with pytest.raises(openai.BadRequestError) as caught:
        _upload(client, _jsonl(CHAT), purpose="assistants")
    assert caught.value.body["param"] == "purpose"


def test_a_file_over_the_body_limit_is_refused_413(client: Any, server: Any) -> None:
    limit = server.settings.api.api_max_body_bytes
    line = json.dumps(CHAT).encode() + b"\n"
    with pytest.raises(openai.APIStatusError) as caught:
        _upload(client, line * (limit // len(line) + 1))
    assert caught.value.status_code == 413


# ----------------------------------------------------------------------------- job refusals


def test_job_refusals_are_openai_errors_and_start_nothing(client: Any, server: Any) -> None:
    words = ("red fox", "blue sky", "green tea", "old oak", "new moon", "hot sun", "cold sea", "dry land", "wet sand")
    chat = _upload(
        client, _jsonl(*(_chat(("user", f"Uppercase: {w}"), ("assistant", w.upper())) for w in words[:9]), CHAT)
    )
    pairs = _upload(
        client, _jsonl(*({**PAIR, "preferred_output": [{"role": "assistant", "content": w}]} for w in words), PAIR)
    ).id
    prompts = _upload(client, _jsonl(*({**PROMPT, "reference_answer": w} for w in words), PROMPT)).id
    small = _upload(client, _jsonl(*(_chat(("user", f"Uppercase: {w}"), ("assistant", w.upper())) for w in words))).id
    assert chat.model_extra["examples"] == 10
    chat = chat.id

    def refused(param: str, **body: Any) -> dict[str, Any]:
        with pytest.raises(openai.BadRequestError) as caught:
            client.fine_tuning.jobs.create(**body)
        assert caught.value.body["param"] == param, caught.value.body
        return caught.value.body  # type: ignore[no-any-return]

    error = refused("model", model="gpt-4o-mini", training_file=chat)
    assert error["code"] == "model_not_available" and "tiny" in error["message"]
    assert (
        refused("model", model="ft:tiny::run-20260101-000000-abcdef", training_file=chat)["code"] == "model_not_found"
    )
    assert (
        refused("training_file", model="tiny", training_file="file-0123456789abcdef01234567")["code"] == "invalid_file"
    )
    refused("validation_file", model="tiny", training_file=chat, validation_file="file-nope")
    assert "at least 10" in refused("training_file", model="tiny", training_file=small)["message"]
    # A file of one kind for a method of another.
    assert "preference" in refused("training_file", model="tiny", training_file=chat, method={"type": "dpo"})["message"]
    refused("training_file", model="tiny", training_file=pairs)
    refused("validation_file", model="tiny", training_file=chat, validation_file=pairs)
    grader = {
        "type": "string_check",
        "name": "g",
        "input": "{{sample.output_text}}",
        "reference": "{{item.reference_answer}}",
        "operation": "eq",
    }

    def rft(hyperparameters: dict[str, Any] | None = None, **changed: str) -> dict[str, Any]:
        section = {"grader": {**grader, **changed}, "hyperparameters": hyperparameters or {}}
        return {"type": "reinforcement", "reinforcement": section}

    def sft(**hyperparameters: Any) -> dict[str, Any]:
        return {"type": "supervised", "supervised": {"hyperparameters": hyperparameters}}

    grader_param = "method.reinforcement.grader"
    assert (
        "code"
        in refused(
            f"{grader_param}.type",
            model="tiny",
            training_file=prompts,
            method=rft(type="python", source="def grade(sample, item):\n    return 1.0\n"),
        )["message"]
    )
    refused(f"{grader_param}.operation", model="tiny", training_file=prompts, method=rft(operation="contains"))
    refused(f"{grader_param}.input", model="tiny", training_file=prompts, method=rft(input="{{sample.text}}"))
    refused(f"{grader_param}.reference", model="tiny", training_file=prompts, method=rft(reference="{{items.x}}"))
    refused(f"{grader_param}.reference", model="tiny", training_file=prompts, method=rft(reference=""))
    hyper_param = "method.reinforcement.hyperparameters.compute_multiplier"
    refused(hyper_param, model="tiny", training_file=prompts, method=rft({"compute_multiplier": 2}))
    refused("method.supervised.hyperparameters.n_epochs", model="tiny", training_file=chat, method=sft(n_epochs=0))
    refused(
        "method.supervised.hyperparameters.learning_rate_multiplier",
        model="tiny",
        training_file=chat,
        method=sft(learning_rate_multiplier=500),
    )
    refused("suffix", model="tiny", training_file=chat, suffix="no spaces allowed")
    refused("metadata", model="tiny", training_file=chat, metadata={f"k{i}": "v" for i in range(17)})
    refused(
        "integrations", model="tiny", training_file=chat, integrations=[{"type": "wandb", "wandb": {"project": "p"}}]
    )

    assert client.fine_tuning.jobs.list().data == []
    assert server.store.list() == []


def test_unknown_jobs_are_404(client: Any) -> None:
    for call in (
        lambda: client.fine_tuning.jobs.retrieve("run-20260101-000000-abcdef"),
        lambda: client.fine_tuning.jobs.cancel("ftjob-abc"),
        lambda: client.fine_tuning.jobs.list_events("run-20260101-000000-abcdef"),
        lambda: client.fine_tuning.jobs.checkpoints.list("run-20260101-000000-abcdef"),
    ):
        with pytest.raises(openai.NotFoundError):
            call()


def test_a_run_not_started_as_a_job_is_not_a_job(client: Any, server: Any) -> None:
    run = server.new_run(status="succeeded")
    with pytest.raises(openai.NotFoundError) as caught:
        client.fine_tuning.jobs.retrieve(run.id)
    assert "/v1/runs" in caught.value.body["hint"]


def test_without_the_token_nothing_answers(server: Any) -> None:
    bare = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bare.files.list()
    with pytest.raises(openai.AuthenticationError):
        bare.fine_tuning.jobs.list()


# ----------------------------------------------------------------------------- graders


def test_graders_validate_and_run_as_openai_answers(client: Any) -> None:
    graders = client.fine_tuning.alpha.graders
    check = {
        "type": "string_check",
        "name": "same",
        "input": "{{sample.output_text}}",
        "reference": "{{item.answer}}",
        "operation": "eq",
    }
    close = {
        "type": "text_similarity",
        "name": "close",
        "input": "{{sample.output_text}}",
        "reference": "{{item.answer}}",
        "evaluation_metric": "rouge_1",
    }
    multi = {
        "type": "multi",
        "name": "both",
        "graders": {"same": check, "close": close},
        "calculate_output": "0.5 * same + 0.5 * close",
    }

    assert graders.validate(grader=multi).grader.type == "multi"
    exact = graders.run(grader=check, model_sample="cold late", item={"answer": "cold late"})
    assert (
        exact.reward == 1.0
        and exact.metadata.type == "string_check"
        and not exact.metadata.errors.invalid_variable_error
    )
    half = graders.run(grader=multi, model_sample="cold early", item={"answer": "cold late"})
    assert half.reward == pytest.approx(0.25) and half.sub_rewards == {"same": 0.0, "close": 0.5}
    missing = graders.run(grader=check, model_sample="x", item={"other": "y"})
    assert missing.reward == 0.0 and missing.metadata.errors.invalid_variable_error

    for bad, param in (
        ({**close, "evaluation_metric": "cosine"}, "grader.evaluation_metric"),
        ({**multi, "calculate_output": "__import__('os').system('true')"}, "grader.calculate_output"),
        ({**multi, "calculate_output": "same + unknown"}, "grader.calculate_output"),
        ({"type": "score_model", "name": "judge"}, "grader.type"),
        ({"type": "python", "name": "p", "source": "def grade(sample, item):\n    return 1.0\n"}, "grader.type"),
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            graders.validate(grader=bad)
        assert caught.value.body["param"] == param, caught.value.body


def test_hostile_uploads_and_bodies_get_4xx_and_leave_nothing(client: Any, server: Any) -> None:
    import httpx

    before, runs = {f.id for f in client.files.list()}, {run.id for run in server.store.list()}
    # A path in the file name never reaches the disk: the dataset's file is named plainly.
    sneaky = _upload(
        client, _jsonl(*(_chat(("user", f"q{i}"), ("assistant", f"a{i}")) for i in range(3))), "../../x.jsonl"
    )
    assert sneaky.filename == "../../x.jsonl"
    names = [e.path for e in server.provider.volume("data").listdir(f"datasets/{sneaky.id}", recursive=True)]
    assert not any(".." in name for name in names)
    with pytest.raises(openai.BadRequestError) as caught:
        _upload(client, b"\xff\xfe not utf-8\n", "binary.jsonl")
    assert "binary.jsonl:1:" in caught.value.body["message"] and "not-utf8" in caught.value.body["message"]
    with httpx.Client(base_url=server.url, headers=server.headers) as raw:
        assert raw.get("/v1/files/..%2F..%2Fetc%2Fpasswd").status_code in (404, 422)
        assert raw.get("/v1/files/" + "f" * 500).status_code == 422
        assert raw.post("/v1/files", content=b"not a form", headers={"content-type": "text/plain"}).status_code == 400
        assert raw.post("/v1/fine_tuning/jobs", content=b"{oops").json()["error"]["type"] == "invalid_request_error"
        assert raw.post("/v1/fine_tuning/jobs", json=[1, 2]).status_code == 400
        assert raw.post("/v1/fine_tuning/alpha/graders/run", json={"grader": "x"}).status_code == 400
    assert {f.id for f in client.files.list()} == before | {sneaky.id}
    assert {run.id for run in server.store.list()} == runs  # no job was started by any of it


def test_the_job_list_pages_newest_first_and_filters_across_pages(client: Any, server: Any) -> None:
    """Ten jobs (records as `jobs.create` writes them, runs saved without a job): pages of three through
    `after`, newest first with ties of one second by id, a metadata filter across pages; a job whose run
    record is gone (`trainkit gc`) is not listed."""
    from trainkit_api.fine_tuning.jobs import NAMESPACE
    from trainkit_core import get_provider
    from trainkit_core.ids import new_run_id
    from trainkit_core.runs.training_run import RunStore, TrainingRun

    provider = get_provider("local", server.settings)
    store, kv = RunStore.for_provider(provider), provider.kv(NAMESPACE)
    start = 1_900_000_000.0  # later than any other job of the module: the first pages are these
    made = []
    for i in range(11):
        now = start + i // 2  # two jobs per second: ties broken by id
        run = TrainingRun(id=new_run_id(now), created_at=now, status="succeeded", config={"dataset": "x", "seed": 1})
        if i != 4:  # the fifth job's run record is gone
            run.attach(store).save()
        team = "search" if i % 3 == 0 else "ads"
        record = {"model": "tiny", "training_file": "file-x", "fine_tuned_model": f"ft:tiny::{run.id}"}
        kv.put(run.id, {**record, "method": {"type": "supervised"}, "metadata": {"team": team}})
        made.append((now, run.id, team, i != 4))
    expected = [job_id for _, job_id, _, kept in sorted(made, key=lambda m: (-m[0], m[1])) if kept]

    pages, after = [], None
    while True:  # every job of this module: nothing before this test made one (each was refused)
        page = client.fine_tuning.jobs.list(limit=3, **({"after": after} if after else {}))
        pages.append([job.id for job in page.data])
        if not page.has_more:
            break
        after = page.data[-1].id
    assert [len(p) for p in pages] == [3, 3, 3, 1] and [j for p in pages for j in p] == expected
    teams = {job_id: team for _, job_id, team, _ in made}
    in_search = [job_id for job_id in expected if teams[job_id] == "search"]
    searched = [job.id for job in client.fine_tuning.jobs.list(limit=2, metadata={"team": "search"}).data]
    assert searched == in_search[:2]
    page = client.fine_tuning.jobs.list(limit=2, metadata={"team": "search"}, after=searched[-1])
    assert [job.id for job in page.data] == in_search[2:4]
