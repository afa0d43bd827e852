"""Streamed tokens from the warm inference actor, and the web API served on the cluster, through HTTP."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from cli_env import ctrl_c_as_in_a_terminal
from ray_helpers import REPO, TRAINKIT, RayEnv, wait_for

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(600)]

TOKEN = "web-token-for-the-cluster-api-7731"
#: A long answer of the untrained base (the adapter off): more token events than the actor may run ahead.
LONG_ANSWER = {"prompt": "Opposites: hot early loud", "max_new_tokens": 64, "base": True, "seed": 3}


#: Straight to the loopback address, whatever proxy the environment names.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(url: str, body: dict[str, Any] | None = None, token: str | None = TOKEN) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if body is not None else "GET")
    try:
        with OPENER.open(request, timeout=300) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "data" in lines:
            events.append((lines.get("event", "message"), json.loads(lines["data"])))
    return events


def refused(url: str) -> bool:
    try:
        OPENER.open(f"{url}/health", timeout=5)
    except urllib.error.URLError as exc:
        return isinstance(exc.reason, ConnectionRefusedError)
    return False


def test_a_stream_comes_from_the_warm_actor_token_by_token(env: RayEnv, trained: dict[str, Any]) -> None:
    """The first token event is in the reader's hands while the actor is still generating the answer."""
    from trainkit_core.inference import client
    from trainkit_ray.inference import STREAM_AHEAD

    provider = env.provider()
    server = provider.inference_server()
    events = client.stream(provider, {**LONG_ANSWER, "model_path": trained["model_path"]})
    first = next(events)
    assert first["type"] == "token"
    # The actor runs at most STREAM_AHEAD events ahead of its reader: its generator has not ended.
    assert server.status()["streaming"] == 1
    rest = list(events)
    assert len(rest) > 2 * STREAM_AHEAD, "too short an answer to tell a stream from a whole answer"
    done = rest[-1]
    assert done["type"] == "done" and all(e["type"] == "token" for e in rest[:-1])
    assert first["text"] + "".join(e["text"] for e in rest[:-1]) == done["text"]
    assert server.status()["streaming"] == 0
    # A reader that stops early cancels the actor's generator.
    early = client.stream(provider, {**LONG_ANSWER, "model_path": trained["model_path"]})
    next(early)
    early.close()
    wait_for(lambda: server.status()["streaming"] == 0, 60, "the cancelled stream's end on the actor")


def test_the_web_api_deployed_on_the_cluster_answers_over_http(env: RayEnv, trained: dict[str, Any]) -> None:
    web = {"TRAINKIT_RAY_WEB": "true", "TRAINKIT_RAY_WEB_PORT": "0"}
    address = env.env["TRAINKIT_RAY_ADDRESS"]
    no_token = RayEnv(env.home, REPO / "datasets", address, **web).cli("app", "deploy", check=False)
    assert no_token.returncode != 0 and "TRAINKIT_API_TOKEN" in no_token.stderr
    cluster = RayEnv(env.home, REPO / "datasets", address, **web, TRAINKIT_API_TOKEN=TOKEN)
    deployed = json.loads(cluster.cli("app", "deploy", "--json").stdout)
    url = deployed["url"]
    assert url and url.startswith("http://127.0.0.1:")
    try:
        assert json.loads(cluster.cli("app", "status", "--json").stdout)["url"] == url
        assert http(f"{url}/health", token=None)[0] == 200
        assert http(f"{url}/v1/runs", token=None)[0] == 401
        status, body = http(f"{url}/v1/runs")
        assert status == 200 and trained["run_id"] in body, "the API reads the cluster's store"
        # A stream over HTTP: the token events as the warm actor yields them, then the whole answer.
        requests = env.provider().inference_server().status()["requests"]
        status, body = http(f"{url}/v1/generate", {**LONG_ANSWER, "model_path": trained["model_path"], "stream": True})
        assert status == 200, body
        events = sse_events(body)
        tokens = [data["text"] for kind, data in events if kind == "token"]
        [done] = [data for kind, data in events if kind == "done"]
        assert len(tokens) > 1 and "".join(tokens) == done["text"]
        assert env.provider().inference_server().status()["requests"] == requests + 1, "not the warm actor's answer"
    finally:
        stopped = json.loads(cluster.cli("app", "stop", "--json").stdout)
    assert stopped["url"] is None
    assert refused(url), "the web API still listens after `app stop`"


def test_trainkit_serve_runs_the_web_api_on_the_cluster_until_interrupted(env: RayEnv, tmp_path: Path) -> None:
    cluster = RayEnv(env.home, REPO / "datasets", env.env["TRAINKIT_RAY_ADDRESS"], TRAINKIT_API_TOKEN=TOKEN)
    cluster.env["TRAINKIT_RAY_WEB_PORT"] = "0"
    # stderr to a file: a pipe nobody reads could fill and block the command it watches.
    errors = tmp_path / "serve.stderr"
    with errors.open("w") as stderr:
        served = subprocess.Popen(
            [*TRAINKIT, "serve"],
            env=cluster.env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            preexec_fn=ctrl_c_as_in_a_terminal,
        )
    try:
        assert served.stdout is not None
        line = served.stdout.readline()  # "" if it exits
        if "web API on the Ray cluster" not in line:
            served.kill()
            served.wait()
            pytest.fail(f"`trainkit serve` said {line!r}; stderr: {errors.read_text()[-3000:]}")
        url = line.split(": ", 1)[1].strip()
        assert http(f"{url}/health", token=None)[0] == 200
        assert http(f"{url}/v1/runs")[0] == 200
        served.send_signal(signal.SIGINT)
        try:
            code = served.wait(timeout=120)
        except subprocess.TimeoutExpired:
            served.kill()
            served.wait()
            pytest.fail(f"`trainkit serve` still ran 120 s after SIGINT; stderr: {errors.read_text()[-3000:]}")
        assert code == 0, errors.read_text()[-3000:]
    finally:
        if served.poll() is None:
            served.kill()
            served.wait()
    assert refused(url), "the web API outlived `trainkit serve`"
    assert json.loads(cluster.cli("app", "status", "--json").stdout)["url"] is None


def test_a_ray_client_without_the_storage_gets_a_stream_whole(
    env: RayEnv, trained: dict[str, Any], ray_cluster: Any, tmp_path: Path
) -> None:
    """Ray Client carries no streaming generators: through it `infer --stream` prints the same answer, at the end."""
    ray_cluster.wait_for_port(ray_cluster.client_port)
    ask = ("infer", "--model-path", trained["model_path"], "--prompt", LONG_ANSWER["prompt"], "--max-new-tokens", "24")
    laptop = RayEnv(
        tmp_path,
        Path(env.env["TRAINKIT_DATASETS_DIR"]),
        ray_cluster.client_address,
        TRAINKIT_RAY_STORAGE=str(env.storage),
        TRAINKIT_RAY_STORAGE_ACCESS="cluster",
    )
    streamed = laptop.cli(*ask, "--stream", timeout=300)
    answered = json.loads(env.cli(*ask, "--json").stdout)
    assert answered["text"].strip() and streamed.stdout.startswith(answered["text"] + "\n")
