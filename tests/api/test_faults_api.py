"""Faults and hostile input met through the web API: nothing lost, nothing corrupted, errors named.

Each test is one class of bug that a fault probe found; docs/developer/records/faults.md
lists them. One real server (uvicorn on 127.0.0.1) per module, with a token.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from api_helpers import TOKEN, Server, serve, settings_for

from trainkit_core.evals.sets import read_set


def test_parallel_eval_uploads_keep_every_example(server: Server) -> None:
    def upload(writer: int) -> dict:
        examples = [{"prompt": f"w{writer} q{i}", "completion": f"a{i}"} for i in range(20)]
        with server.client() as client:
            response = client.post("/v1/evals/parallel/examples", json={"examples": examples})
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(upload, range(6)))
    assert all(a["added"] == 20 for a in answers)
    assert sorted(a["total"] for a in answers) == [20, 40, 60, 80, 100, 120]  # each saw the ones before it
    stored = read_set(server.provider.volume("eval"), "parallel")
    assert len(stored) == 120 and {e["messages"][0]["content"] for e in stored} == {
        f"w{w} q{i}" for w in range(6) for i in range(20)
    }


def test_what_a_client_adds_to_a_running_run_survives_the_jobs_saves(server: Server, tmp_path: Path) -> None:
    """The job holds its own copy of the record and writes it back at every progress save."""
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.training.background import JobWrites

    run = server.new_run(status="running", phase="training", step=1)
    job_copy = RunStore.for_provider(server.provider).get(run.id)  # the job's store, as in its own process
    writes = JobWrites(job_copy).start()
    chart = tmp_path / "chart.svg"
    chart.write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    try:
        for step in range(2, 40):
            job_copy.step = step
            job_copy.save()  # queued, written by the job's background writer
            if step == 10:
                run.add_dashboard_component(name="chart", component_type="svg", from_path=chart)
            if step == 20:
                run.record_latest_rollout({"step": 20, "samples": ["from a client"]})
        job_copy.record_latest_rollout({"step": 30, "samples": ["from the job"]})
    finally:
        writes.close()
    job_copy.step = 40
    job_copy.save()
    with server.client() as client:
        record = client.get(f"/v1/runs/{run.id}").json()
        assert client.get(f"/v1/runs/{run.id}/components/chart").status_code == 200
    assert record["step"] == 40
    stored = server.store.get(run.id)
    assert [c["name"] for c in stored.dashboard_components] == ["chart"]
    assert stored.latest_rollout is not None and stored.latest_rollout["samples"] == ["from the job"]


@pytest.mark.slow
def test_a_run_whose_submitter_died_before_saving_the_call_id_is_cancellable(server: Server) -> None:
    """`kill -9` of the server right after `POST /v1/runs`: the job runs, the submitter never noted its call.

    A detached `sleep` job stands in for the training job; the record is what the train
    job's first save writes then: its own call id as `call_id` (it notes it when the
    submitter has not) and as `attempt_call_id`.
    """
    handle = server.provider.spawn("sleep", seconds=120)
    run = server.new_run(status="running", call_id=handle.call_id, attempt_call_id=handle.call_id)
    run.created_at = run.updated_at = time.time() - 20 * 60  # beyond the reconciler's patience for runs without a job
    run.store.records.put(run.id, run.model_dump(mode="json"))
    never_started = server.new_run(status="pending")
    try:
        with server.client() as client:
            shown = client.get(f"/v1/runs/{run.id}").json()
            assert shown["status"] == "running"  # the reconciler finds the job alive through its own id
            cancelled = client.post(f"/v1/runs/{run.id}/cancel")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "stopped"
            assert handle.status().state == "cancelled"  # the job itself ended, not only the record
            # No job id at all yet: the cancel cannot reach anything, so it does not answer success.
            refused = client.post(f"/v1/runs/{never_started.id}/cancel")
            assert refused.status_code == 409 and "cannot be reached" in refused.json()["error"]["message"]
            assert client.get(f"/v1/runs/{never_started.id}").json()["status"] == "pending"
    finally:
        handle.cancel()


def raw_request(url: str, head: str, timeout: float = 10.0) -> str:
    """Send `head` (request line and headers) on a raw socket, with no body after it; the answer's first line."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head.encode())
        answer = sock.recv(65536).decode("latin-1")
    return answer.split("\r\n", 1)[0]


def test_the_token_is_checked_before_a_body_is_read(server: Server) -> None:
    """The body is announced (30 MB) but never sent: only a server that did not wait for it can answer."""
    head = (
        "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: 30000000\r\n\r\n"
    )
    assert raw_request(server.url, head).startswith("HTTP/1.1 401")
    wrong = head.replace("Host:", "Authorization: Bearer not-the-token\r\nHost:")
    assert raw_request(server.url, wrong).startswith("HTTP/1.1 401")
    with server.client() as client:  # with the token, the body is read and judged
        assert client.post("/v1/runs", content=b"{not json").status_code == 422


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server without a token (`trainkit serve` on 127.0.0.1 allows that)."""
    yield from serve(settings_for(tmp_path_factory.mktemp("open-home"), None))


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:80", "127.0.0.1.nip.io", "0.0.0.0", ""])
def test_a_tokenless_server_refuses_a_rebound_host_name(open_server: Server, host: str) -> None:
    """DNS rebinding: a page on attacker.example re-points its name at 127.0.0.1; the browser sends its Host."""
    with open_server.client() as client:
        for method, path in (("GET", "/v1/runs"), ("GET", "/v1/models"), ("POST", "/v1/runs")):
            answer = client.request(method, path, headers={"Host": host}, json={"dataset": "demo"})
            assert answer.status_code == 403, (method, path, answer.text)
            assert (
                answer.json()["error"]["type"] == "permission_error" and "loopback" in answer.json()["error"]["message"]
            )


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "app.localhost:{port}"])
def test_a_tokenless_server_answers_loopback_names(open_server: Server, host: str) -> None:
    port = open_server.url.rsplit(":", 1)[1]
    with open_server.client() as client:
        assert client.get("/v1/runs", headers={"Host": host.format(port=port)}).status_code == 200


def test_a_tokenless_server_refuses_cross_origin_changes(open_server: Server) -> None:
    port = open_server.url.rsplit(":", 1)[1]
    own = f"http://127.0.0.1:{port}"
    body = {"examples": [{"prompt": "q", "completion": "a"}]}
    with open_server.client() as client:
        for headers in ({"Origin": "https://attacker.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}):
            answer = client.post("/v1/evals/rebinding/examples", headers=headers, json=body)
            assert answer.status_code == 403 and "cross-origin" in answer.json()["error"]["message"], headers
        assert not open_server.provider.volume("eval").exists("sets/rebinding")  # nothing was written
        # Reading is not a change; the server's own page (same origin) and clients without Origin may change.
        assert client.get("/v1/runs", headers={"Origin": "https://attacker.example"}).status_code == 200
        assert client.post("/v1/evals/rebinding/examples", headers={"Origin": own}, json=body).status_code == 201
        assert client.post("/v1/evals/rebinding/examples", json=body).status_code == 201


def test_a_server_with_a_token_keeps_answering_any_host(server: Server) -> None:
    with server.client() as client:
        assert client.get("/v1/runs", headers={"Host": "trainkit.example.com"}).status_code == 200
        answer = client.post(
            "/v1/evals/tokened/examples",
            headers={"Origin": "https://elsewhere.example"},
            json={"examples": [{"prompt": "q", "completion": "a"}]},
        )
        assert answer.status_code == 201


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seed", 10**30),
        ("warmup_steps", 10**20),
        ("modules_to_save", ["__class__"]),
        ("modules_to_save", ["lm_head._parameters"]),
        ("gpu", "H100; rm -rf /"),
        ("save_every", 10**18),
    ],
)
def test_what_the_job_would_refuse_is_refused_at_submission(server: Server, field: str, value: object) -> None:
    job = {"dataset": "no-such-dataset-faults", "model_size": "tiny", "steps": 5, field: value}
    before = len(server.store.records.items("run-"))
    with server.client() as client:
        for dry_run in (False, True):
            answer = client.post("/v1/runs", params={"dry_run": dry_run}, json=job)
            assert answer.status_code in (400, 422), (field, dry_run, answer.text)
            assert field in answer.text
    assert len(server.store.records.items("run-")) == before


def test_a_dry_run_refuses_what_the_start_refuses(server: Server) -> None:
    job = {"dataset": "no-such-dataset-faults", "base_model": "/etc", "steps": 5}
    with server.client() as client:
        started = client.post("/v1/runs", json=job)
        planned = client.post("/v1/runs", params={"dry_run": True}, json=job)
    assert started.status_code == planned.status_code == 400, (started.text, planned.text)
    assert started.json()["error"]["message"] == planned.json()["error"]["message"]


def test_one_step_with_the_presets_warm_up_learns_and_an_explicit_one_is_refused(server: Server) -> None:
    from trainkit_core.training.config import TrainConfig

    assert TrainConfig.parse({"dataset": "d", "steps": 1}).resolve().warmup_steps == 0  # tiny warms up 20 steps
    with server.client() as client:
        answer = client.post("/v1/runs", json={"dataset": "no-such-dataset-faults", "steps": 1, "warmup_steps": 3})
    assert answer.status_code == 400 and "learning rate 0" in answer.json()["error"]["message"]


def test_the_api_answers_507_for_a_full_disk(tmp_path: Path) -> None:
    """The home is a real 5 MB file system (a tmpfs), filled up: see tests/cli/test_disk_full.py."""
    from trainkit_core.testing.small_disk import fill, mount_tmpfs, unmount

    small_home = tmp_path / "small-home"
    reason = mount_tmpfs(small_home, "5m")
    if reason:
        pytest.skip(reason)
    served = serve(settings_for(small_home, TOKEN))
    server = next(served)
    try:
        filler = fill(small_home)
        with server.client() as client:
            answer = client.post(
                "/v1/evals/full/examples", json={"examples": [{"prompt": "q" * 1000, "completion": "a"}] * 10}
            )
        assert answer.status_code == 507, answer.text
        error = answer.json()["error"]
        assert error["type"] == "out_of_space" and "out of disk space" in error["message"]
        filler.unlink()
    finally:
        served.close()
        unmount(small_home)


@pytest.mark.slow
def test_a_broken_dataset_toml_never_breaks_a_job_for_another_dataset(tmp_path: Path, repo_root: Path) -> None:
    import shutil

    from trainkit_core.settings import ApiSettings, DatasetSettings, ProviderSettings, Settings

    datasets = tmp_path / "datasets"
    shutil.copytree(repo_root / "datasets" / "demo", datasets / "demo")
    (datasets / "broken").mkdir()
    (datasets / "broken" / "dataset.toml").write_text(
        f'name = "broken"\ntrain = ["t.jsonl"]\neval_seed = {"9" * 5000}\n'
    )
    settings = Settings(
        provider=ProviderSettings(home=tmp_path / "home"),
        datasets=DatasetSettings(datasets_dir=datasets),
        api=ApiSettings(api_token=TOKEN),
    )
    served = serve(settings)
    server = next(served)
    try:
        with server.client() as client:
            planned = client.post("/v1/runs", params={"dry_run": True}, json={"dataset": "demo", "steps": 5})
            assert planned.status_code == 200, planned.text
            missing = client.post("/v1/runs", params={"dry_run": True}, json={"dataset": "nosuch", "steps": 5})
            assert missing.status_code == 404 and "nosuch" in missing.json()["error"]["message"], missing.text
            broken = client.post("/v1/runs", params={"dry_run": True}, json={"dataset": "broken", "steps": 5})
            assert broken.status_code == 400 and "dataset.toml" in broken.json()["error"]["message"], broken.text
    finally:
        served.close()
