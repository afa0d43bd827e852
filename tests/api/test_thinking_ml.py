"""Thinking end to end: a Gemma 4-format tiny model trained on reasoning, asked to think through OpenAI's client.

`reasoning_effort` turns Gemma 4's thinking switch on (`none` off). The thinking comes
back as `message.reasoning_content`, never inside `content`; streamed, it arrives as
`delta.reasoning_content` chunks that add up to the same text the plain answer carries.
"""

from __future__ import annotations

import json
import random
from typing import Any

import httpx
import openai
import pytest
from api_helpers import ml_settings, serve

pytestmark = [pytest.mark.ml, pytest.mark.e2e]


def _example(rng: random.Random) -> dict[str, Any]:
    a, b = rng.randrange(10), rng.randrange(10)
    return {
        "messages": [
            {"role": "user", "content": f"Add {a} and {b}."},
            {"role": "assistant", "reasoning_content": f"{a} plus {b} makes {a + b}.", "content": f"{a + b}"},
        ]
    }


@pytest.fixture(scope="module")
def served_model(tmp_path_factory: pytest.TempPathFactory):
    rng = random.Random(11)
    root = tmp_path_factory.mktemp("thinking-datasets")
    folder = root / "sums"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(_example(rng)) + "\n" for _ in range(200)))
    (folder / "dataset.toml").write_text('name = "sums"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    for server in serve(ml_settings(tmp_path_factory.mktemp("thinking-home"), root, idle_s=30)):
        with server.client(timeout=httpx.Timeout(120.0)) as client:
            body = {"dataset": "sums", "model_size": "tiny", "chat_format": "gemma4", "steps": 150}
            created = client.post("/v1/runs", json=body)
            assert created.status_code == 201, created.text
            run_id = created.json()["id"]
        server.store.get(run_id).result(timeout=900, stop_app_on_success=False)
        yield server, f"trained/{run_id}"


def test_asked_to_think_the_model_thinks_apart_from_its_answer_plain_and_streamed(served_model: Any) -> None:
    server, model = served_model
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=server.token, timeout=180, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Add 2 and 5."}]

    plain = client.chat.completions.create(model=model, messages=messages, max_tokens=32, reasoning_effort="high")
    message = plain.choices[0].message
    thinking = message.model_extra.get("reasoning_content")
    assert thinking, message  # it learnt to open the thought channel
    assert "<|channel>" not in (message.content or "") and thinking not in (message.content or "")

    chunks = list(
        client.chat.completions.create(
            model=model, messages=messages, max_tokens=32, reasoning_effort="high", stream=True
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    streamed_thinking = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    streamed_content = "".join(d.content or "" for d in deltas)
    assert streamed_thinking.strip() == thinking.strip()
    assert streamed_content.strip() == (message.content or "").strip()
    assert sum(1 for d in deltas if (d.model_extra or {}).get("reasoning_content")) > 1  # as it is written

    # An effort OpenAI does not define is refused, naming the field (not silently taken for "think").
    with pytest.raises(openai.UnprocessableEntityError, match="reasoning_effort"):
        client.chat.completions.create(model=model, messages=messages, reasoning_effort="maximum")  # type: ignore[arg-type]
