"""A dry run refuses exactly what the start refuses, with the same answer.

`POST /v1/runs?dry_run=true` and `POST /v1/runs` go through the same checks: images on the
text-only tiny model, image data with DPO or GRPO, an unknown DPO loss type, numbers that
are not numbers, a dataset that does not exist (whatever the method). Nothing is started.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import TOKEN, Server, serve
from PIL import Image

from trainkit_core.settings import ApiSettings, DatasetSettings, ProviderSettings, Settings


def _write(root: Path, name: str, fmt: str, record: dict[str, Any]) -> None:
    folder = root / name
    (folder / "images").mkdir(parents=True)
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    (folder / "images" / "a.png").write_bytes(buffer.getvalue())
    (folder / "dataset.toml").write_text(f'name = "{name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\n')
    (folder / "train.jsonl").write_text((json.dumps(record) + "\n") * 4)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("api-checks")
    root = home / "datasets"
    picture = {
        "role": "user",
        "content": [{"type": "text", "text": "What?"}, {"type": "image_url", "image_url": {"url": "images/a.png"}}],
    }
    _write(root, "pics", "chat", {"messages": [picture, {"role": "assistant", "content": "red"}]})
    pair = {
        "input": {"messages": [picture]},
        "preferred_output": [{"role": "assistant", "content": "red"}],
        "non_preferred_output": [{"role": "assistant", "content": "blue"}],
    }
    _write(root, "pics-pairs", "preference", pair)
    _write(root, "pics-prompts", "prompt", {"messages": [picture], "reference": "red"})
    text_pair = {**pair, "input": {"messages": [{"role": "user", "content": "hi"}]}}
    _write(root, "word-pairs", "preference", text_pair)
    settings = Settings(
        provider=ProviderSettings(home=home / "home"),
        api=ApiSettings(api_token=TOKEN),
        datasets=DatasetSettings(datasets_dir=root),
    )
    yield from serve(settings)


GRPO = {"method": "grpo", "rewards": ["exact_match"]}
CASES = [
    ({"dataset": "pics"}, 400, "text-only model"),
    ({"dataset": "pics-pairs", "model_size": "4b", "method": "dpo"}, 400, "--method dpo trains on text only"),
    ({"dataset": "pics-prompts", "model_size": "4b", **GRPO}, 400, "--method grpo trains on text only"),
    ({"dataset": "word-pairs", "method": "dpo", "dpo_loss_type": ["nosuch"]}, 422, "known loss types: sigmoid"),
    ({"dataset": "word-pairs", "method": "dpo", "dpo_beta": "NaN"}, 422, "is not a number"),
    ({"dataset": "word-pairs", "method": "dpo", "max_cost_usd": "nan"}, 422, "is not a number"),
    ({"dataset": "pics-prompts", **GRPO, "temperature": "Infinity"}, 422, "is not a finite number"),
    ({"dataset": "pairs"}, 404, "no dataset 'pairs'"),
    ({"dataset": "pairs", "method": "dpo"}, 404, "no dataset 'pairs'"),
    ({"dataset": "pairs", **GRPO}, 404, "no dataset 'pairs'"),
]


@pytest.mark.parametrize(("body", "status", "expected"), CASES)
def test_a_dry_run_refuses_what_the_start_refuses(
    server: Server, body: dict[str, Any], status: int, expected: str
) -> None:
    with server.client() as client:
        planned = client.post("/v1/runs", params={"dry_run": "true"}, json=body)
        started = client.post("/v1/runs", json=body)
        assert client.get("/v1/runs").json()["data"] == []
    assert (planned.status_code, planned.json()) == (started.status_code, started.json())
    assert planned.status_code == status and expected in planned.text, planned.text
    assert "less than" not in planned.text and "has format" not in planned.text
