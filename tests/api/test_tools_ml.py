"""Tool calls end to end: train the tiny model on a tool-calling dataset, then call it as OpenAI's client does.

A clock tool (``get_time(city)``) over eight cities: the model learns to answer a question
about the time with a call, and to say the time once the tool has answered. Over HTTP on a
real uvicorn server, with the official `openai` client: a request with `tools` gets
`tool_calls` back, plain and streamed (the client's own accumulation of the deltas), and
the conversation goes on with the tool's answer. The demo's accuracy on unseen arguments
is measured by the tool-calling tutorial; this module checks the API's shapes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import ml_settings, serve

pytestmark = [pytest.mark.ml, pytest.mark.e2e]

CITIES = ("Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Delhi", "Quito", "Perth")
QUESTIONS = ("What time is it in {}?", "Tell me the time in {}.", "Time in {} now?", "Do you know the time in {}?")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The local time in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def _conversation(rng: random.Random, index: int) -> dict[str, Any]:
    city = rng.choice(CITIES)
    hour = f"{rng.randrange(24):02d}:{rng.choice(('00', '15', '30', '45'))}"
    call = {
        "id": f"c{index}",
        "type": "function",
        "function": {"name": "get_time", "arguments": json.dumps({"city": city})},
    }
    return {
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": rng.choice(QUESTIONS).format(city)},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": json.dumps({"time": hour})},
            {"role": "assistant", "content": f"It is {hour} in {city}."},
        ],
    }


def clock_dataset(root: Path) -> Path:
    rng = random.Random(7)
    folder = root / "clock"
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text("".join(json.dumps(_conversation(rng, i)) + "\n" for i in range(160)))
    (folder / "eval.jsonl").write_text("".join(json.dumps(_conversation(rng, 1000 + i)) + "\n" for i in range(16)))
    (folder / "dataset.toml").write_text(
        'name = "clock"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )
    return root


@pytest.fixture(scope="module")
def served_model(tmp_path_factory: pytest.TempPathFactory):
    home, datasets = tmp_path_factory.mktemp("tools-home"), clock_dataset(tmp_path_factory.mktemp("tools-datasets"))
    for server in serve(ml_settings(home, datasets, idle_s=30)):
        with server.client(timeout=httpx.Timeout(120.0)) as client:
            created = client.post("/v1/runs", json={"dataset": "clock", "model_size": "tiny"})
            assert created.status_code == 201, created.text
            run_id = created.json()["id"]
        server.store.get(run_id).result(timeout=900, stop_app_on_success=False)  # JobError unless it succeeded
        yield server, f"trained/{run_id}"


def test_the_openai_client_gets_tool_calls_plain_and_streamed_and_goes_on_after_the_answer(served_model) -> None:
    openai = pytest.importorskip("openai")
    server, model = served_model
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=server.token, timeout=180, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "What time is it in Oslo?"}]

    completion = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=48)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_time" and json.loads(call.function.arguments) == {"city": "Oslo"}

    # Streamed: the SDK's own chunk types; the call arrives as OpenAI streams one (index, id, name, arguments).
    chunks = list(
        client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=48, stream=True)
    )
    deltas = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    assert [d.index for d in deltas] == [0] and deltas[0].function.name == "get_time"
    assert json.loads(deltas[0].function.arguments) == {"city": "Oslo"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"

    # The conversation goes on with the call and the tool's answer, as an agent's loop sends it.
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"time": "09:30"})},
    ]
    after = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=24)
    assert after.choices[0].finish_reason == "stop" and after.choices[0].message.tool_calls is None
    assert "Oslo" in (after.choices[0].message.content or ""), after.choices[0].message

    # Without tools offered, the same question gets text: no call is read from it.
    plain = client.chat.completions.create(model=model, messages=messages[:1], max_tokens=48)
    assert plain.choices[0].message.tool_calls is None and plain.choices[0].finish_reason in ("stop", "length")

    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        client.chat.completions.create(model=model, messages=messages[:1], tools=TOOLS, tool_choice="required")
    with pytest.raises(openai.BadRequestError, match="tool_call_id"):
        client.chat.completions.create(
            model=model, messages=[*messages[:2], {"role": "tool", "content": "x"}], tools=TOOLS
        )


def test_the_runs_eval_scores_its_tool_calls(served_model) -> None:
    """The post-training eval asks for each eval conversation's call: the tuned model makes it, the base does not."""
    server, model = served_model
    with server.client() as client:
        metrics = client.get(f"/v1/runs/{model.removeprefix('trained/')}").json()["metrics"]
    assert metrics["eval_tool_call_accuracy"] >= 0.9, metrics
    assert metrics["base_eval_tool_call_accuracy"] == 0.0, metrics


def test_trainkit_infer_prints_the_call(served_model, tmp_path: Path) -> None:
    import subprocess
    import sys

    server, model = served_model
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    env = {"TRAINKIT_HOME": str(server.provider.settings.provider.home), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainkit_cli",
            "infer",
            "--model-path",
            model,
            "--prompt",
            "Time in Lima now?",
            "--tools",
            str(tmp_path / "tools.json"),
            "--no-warm",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert 'call get_time({"city": "Lima"})' in done.stdout, done.stdout + done.stderr
    assert "finish tool_calls" in done.stderr
