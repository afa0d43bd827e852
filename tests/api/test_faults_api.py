"""Faults and hostile input met through the web API: nothing lost, nothing corrupted, errors named.

Each test is one class of bug that a fault probe found (issue 29); docs/records/faults.md
lists them. One real server (uvicorn on 127.0.0.1) per module, with a token.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from api_helpers import Server

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
