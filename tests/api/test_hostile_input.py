"""Hostile and careless input to the API: a 4xx in the error shape, never a 500.

Each test covers a class of input a probe found answered with a 500, a redirect or a
silent change: sequence numbers that `str.isdigit()` accepts but `int()` refuses,
oversized and non-JSON `metadata`, unbounded bodies, model names that are neither a
trained model nor a model size, and paths with a trailing slash.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import TOKEN, Server, serve

from trainkit_api.app import route_table
from trainkit_core.models.presets import PRESETS
from trainkit_core.runs.metadata import MAX_BYTES, MAX_DEPTH
from trainkit_core.settings import ApiSettings, DatasetSettings, ProviderSettings, Settings

#: A job on a dataset that exists nowhere: a request that gets past validation ends in a 404.
JOB = {"dataset": "no-such-dataset-hostile", "model_size": "tiny", "steps": 1}


def runs(server: Server) -> int:
    return len(server.store.records.items("run-"))


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


# ------------------------------------------------------------------ sequence numbers

#: Text `str.isdigit()` (or `int()`) accepts but a sequence number is not: superscripts,
#: other scripts' digits, fullwidth digits, underscores, signs, decimals.
BAD_SEQS = ["\u00b2", "1\u00b3", "\u0661\u0662", "\uff11", "1_000", "+1", "-1", "1.0", "1e3", "0x10", "9" * 17]


@pytest.mark.parametrize("value", BAD_SEQS)
def test_malformed_last_event_id_is_a_422_naming_the_header(server: Server, value: str) -> None:
    run = server.new_run(status="succeeded")
    with server.client() as client:
        response = client.get(f"/v1/runs/{run.id}/events/stream", headers={"Last-Event-ID": value.encode("utf-8")})
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["param"] == "last-event-id"


@pytest.mark.parametrize("value", BAD_SEQS)
@pytest.mark.parametrize("route", ["events", "events/stream"])
def test_malformed_after_is_a_422_naming_the_parameter(server: Server, value: str, route: str) -> None:
    run = server.new_run(status="succeeded")
    with server.client() as client:
        response = client.get(f"/v1/runs/{run.id}/{route}", params={"after": value})
    assert response.status_code == 422, response.text
    assert error_of(response)["param"] == "after"


def test_a_newline_after_a_sequence_number_is_refused(server: Server) -> None:
    run = server.new_run(status="succeeded")
    with server.client() as client:
        response = client.get(f"/v1/runs/{run.id}/events", params={"after": "1\n"})
    assert response.status_code == 422 and error_of(response)["param"] == "after"


def test_well_formed_sequence_numbers_still_resume(server: Server) -> None:
    run = server.new_run(status="succeeded")
    for i in range(3):
        run.events.append("log", text=f"line {i}")
    with server.client() as client:
        page = client.get(f"/v1/runs/{run.id}/events", params={"after": "1"}).json()
        stream = client.get(f"/v1/runs/{run.id}/events/stream", headers={"Last-Event-ID": "2"})
    assert [e["seq"] for e in page["data"]] == [2, 3]
    assert stream.status_code == 200 and "id: 3" in stream.text and "id: 2\n" not in stream.text


# ------------------------------------------------------------------------- metadata


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("metadata", "words"),
    [
        (nested(300), "nested deeper"),
        (nested(MAX_DEPTH + 1), "nested deeper"),
        ({"a": [[[[[[[[[[1]]]]]]]]]]}, "nested deeper"),
        ({"blob": "x" * (MAX_BYTES + 1)}, "over the limit"),
        ({f"k{i}": "v" * 100 for i in range(200)}, "over the limit"),
    ],
    ids=["300-levels", "one-too-deep", "deep-list", "one-big-string", "many-keys"],
)
def test_metadata_too_deep_or_too_large_is_a_422_naming_it(server: Server, metadata: dict, words: str) -> None:
    before = runs(server)
    with server.client() as client:
        response = client.post("/v1/runs", json={**JOB, "metadata": metadata})
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["param"] == "metadata" and words in error["message"]
    assert runs(server) == before


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_in_metadata_are_refused(server: Server, constant: str) -> None:
    before = runs(server)
    body = json.dumps({**JOB, "metadata": {"x": 0}}).replace('"x": 0', f'"x": [1, {constant}]')
    with server.client() as client:
        response = client.post("/v1/runs", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["param"] == "metadata" and "metadata.x[1]" in error["message"]
    assert runs(server) == before


def test_metadata_nested_past_the_json_parsers_stack_is_a_4xx(server: Server) -> None:
    body = (
        '{"dataset": "no-such-dataset-hostile", "model_size": "tiny", "metadata": '
        + "[" * 100_000
        + "]" * 100_000
        + "}"
    )
    with server.client() as client:
        response = client.post("/v1/runs", content=body, headers={"Content-Type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert "error" in response.json()


def test_reasonable_metadata_passes_validation(server: Server) -> None:
    """Limits must not refuse what a sweep stores: the request gets past validation (to the dataset check)."""
    metadata = {"group_id": "sweep-1", "sweep": {"lr": 1e-4, "r": 8}, "tags": ["a", "b"], "note": "é" * 100}
    with server.client() as client:
        response = client.post("/v1/runs", json={**JOB, "metadata": metadata})
    assert response.status_code != 422, response.text


# ------------------------------------------------------------------------ body limit


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("api-small")
    settings = Settings(provider=ProviderSettings(home=home), api=ApiSettings(api_token=TOKEN, api_max_body_bytes=4096))
    yield from serve(settings)


def test_default_body_limit_fits_an_eval_upload() -> None:
    """The default takes the most examples the route accepts (100,000), of a few hundred bytes each."""
    example = {"messages": [{"role": "user", "content": "q" * 300}, {"role": "assistant", "content": "a" * 150}]}
    upload = len(json.dumps({"examples": [example] * 100_000}))
    assert ApiSettings().api_max_body_bytes > upload


def test_a_declared_body_over_the_limit_is_a_413_before_auth(small_server: Server) -> None:
    body = json.dumps({**JOB, "metadata": {"pad": "x" * 8000}})
    with httpx.Client(base_url=small_server.url, timeout=30) as client:  # no token
        response = client.post("/v1/runs", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert error_of(response)["type"] == "request_too_large"
    assert "TRAINKIT_API_MAX_BODY_BYTES" in error_of(response)["message"]


def test_a_chunked_body_over_the_limit_is_a_413(small_server: Server) -> None:
    before = runs(small_server)

    def chunks() -> Iterator[bytes]:
        yield json.dumps(JOB)[:-1].encode() + b', "metadata": {"pad": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}}'

    with small_server.client() as client:
        response = client.post("/v1/runs", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text
    assert error_of(response)["type"] == "request_too_large"
    assert runs(small_server) == before


def test_a_body_under_the_limit_is_read(small_server: Server) -> None:
    with small_server.client() as client:
        response = client.post("/v1/runs", json={**JOB, "metadata": {"pad": "x" * 1000}})
    assert response.status_code not in (413, 422), response.text


# ---------------------------------------------------------------- strict datasets


@pytest.mark.ml  # the train job's pip extra is checked before the dataset
def test_strict_dataset_refuses_unknown_keys_before_any_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    home = tmp_path_factory.mktemp("api-strict")
    datasets = home / "datasets"
    folder = datasets / "extra"
    folder.mkdir(parents=True)
    (folder / "dataset.toml").write_text('name = "extra"\ntrain = ["train.jsonl"]\n')
    good = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    (folder / "train.jsonl").write_text(json.dumps(good) + "\n" + json.dumps({**good, "weight": 1}) + "\n")
    settings = Settings(
        provider=ProviderSettings(home=home),
        datasets=DatasetSettings(datasets_dir=datasets),
        api=ApiSettings(api_token=TOKEN),
    )
    served = serve(settings)
    strict = next(served)
    try:
        with strict.client() as client:
            response = client.post("/v1/runs", json={"dataset": "extra", "steps": 1, "strict_dataset": True})
        assert response.status_code == 400, response.text
        assert "train.jsonl:2: warning [unknown-key] unknown key 'weight'" in error_of(response)["message"]
        assert runs(strict) == 0
    finally:
        served.close()


# ------------------------------------------------------------------------ model names

HOSTILE_MODELS = ["/etc/passwd", "../../etc/passwd", "tiny; rm -rf ~", "$(reboot)", "4B", "tiny ", "a" * 300]


@pytest.mark.parametrize("model", HOSTILE_MODELS)
def test_chat_completions_refuses_a_model_that_is_neither_trained_nor_a_size(server: Server, model: str) -> None:
    body = {"model": model[:300], "messages": [{"role": "user", "content": "hi"}]}
    with server.client() as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert all(size in error["message"] for size in PRESETS)
    assert model.strip() not in error.get("hint", "")


@pytest.mark.parametrize("model", HOSTILE_MODELS)
def test_generate_refuses_an_unknown_model_size(server: Server, model: str) -> None:
    with server.client() as client:
        response = client.post("/v1/generate", json={"model_size": model, "prompt": "hi"})
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert "known sizes" in error["message"] and all(size in error["message"] for size in PRESETS)
    assert model.strip() not in error.get("hint", "")


def test_a_known_size_without_a_model_is_404_with_a_hint_of_known_words(server: Server) -> None:
    with server.client() as client:
        response = client.post(
            "/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": "x"}]}
        )
    assert response.status_code == 404
    assert "--model-size tiny" in error_of(response)["hint"]


# ------------------------------------------------------------------- trailing slashes


@pytest.mark.parametrize("path", ["/v1/runs/", "/health/", "/v1/models/", "/v1/info/", "/v1/evals/sets/"])
@pytest.mark.parametrize("with_token", [False, True])
def test_a_trailing_slash_is_a_json_404_not_a_redirect(server: Server, path: str, with_token: bool) -> None:
    headers = {"Host": "evil.example", **(server.headers if with_token else {})}
    with httpx.Client(base_url=server.url, timeout=30, follow_redirects=False) as client:
        for method in ("GET", "POST"):
            response = client.request(method, path, headers=headers)
            # A POST without the token is refused before anything else (its body is never read).
            expected = (401,) if method == "POST" and not with_token else (404, 405)
            assert response.status_code in expected, (method, path, response.status_code)
            assert "location" not in response.headers
            assert "evil.example" not in response.text
            assert "error" in response.json()


def test_nothing_answers_with_a_location(server: Server) -> None:
    """Every route of the app, with a slash added or removed: no 3xx anywhere."""
    paths = {path for path, _ in route_table(server.app)}
    with httpx.Client(base_url=server.url, timeout=30, follow_redirects=False) as client:
        for path in paths:
            other = path.rstrip("/") if path.endswith("/") and path != "/" else path + "/"
            response = client.get(other.replace("{", "x").replace("}", "x"), headers={"Host": "evil.example"})
            assert not 300 <= response.status_code < 400, (other, response.status_code)
