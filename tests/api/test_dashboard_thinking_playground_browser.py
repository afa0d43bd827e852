"""The playground asks a Gemma 4 model to think and shows its thought apart from its answer, in headless Chromium.

A Gemma 4-format tiny model trained on sums with reasoning (as `test_thinking_ml`), through the API
of a real server on 127.0.0.1 (the fixtures of `test_dashboard_browser`). With the think box
ticked, the request carries `reasoning_effort` and the streamed `delta.reasoning_content` fills the
"Thinking" block, never the answer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_dashboard_browser as dashboard
from test_dashboard_browser import TOKEN, Server
from test_thinking_ml import _example

browser, page = dashboard.browser, dashboard.page

pytestmark = [pytest.mark.browser, pytest.mark.ml]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard.serve(tmp_path_factory, TOKEN) as served:
        rng = random.Random(11)
        folder = served.settings.datasets.datasets_dir / "sums"
        folder.mkdir()
        (folder / "train.jsonl").write_text("".join(json.dumps(_example(rng)) + "\n" for _ in range(200)))
        (folder / "dataset.toml").write_text('name = "sums"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
        yield served


@pytest.fixture(scope="module")
def thinking_run(server: Server) -> str:
    return server.train({"dataset": "sums", "model_size": "tiny", "chat_format": "gemma4", "steps": 150}, limit_s=900)


def test_the_playground_shows_the_thought_apart_from_the_answer(
    page: Any, server: Server, thinking_run: str, tmp_path: Path
) -> None:
    page.evaluate("(id) => { location.hash = '#/models/' + id; }", thinking_run)
    page.locator("#playground").wait_for()
    assert page.is_hidden("#pg-tuned-thought")
    page.check("#pg-think")
    page.fill("#pg-prompt", "Add 2 and 5.")
    with page.expect_request(lambda r: r.url.endswith("/v1/chat/completions")) as first:
        page.click("#pg-send")
    for side in ("tuned", "base"):
        page.wait_for_function(
            f"/^(done|stopped at 64 tokens)/.test(document.getElementById('pg-{side}-status').textContent)",
            timeout=240_000,
        )
    assert json.loads(first.value.post_data or "{}")["reasoning_effort"] == "high"
    assert page.is_visible("#pg-tuned-thought")
    thought = page.inner_text("#pg-tuned-thinking").strip()
    answer = page.inner_text("#pg-tuned").strip()
    assert thought and "plus" in thought, thought  # the trained thought: "2 plus 5 makes 7."
    assert thought not in answer and "<|channel>" not in answer
    page.screenshot(path=str(tmp_path / "thinking-playground.png"), full_page=True)
