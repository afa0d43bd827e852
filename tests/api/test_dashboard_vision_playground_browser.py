"""The playground of a vision run takes a picture, in headless Chromium.

A tiny-gemma3mm run of 4 steps on a few shapes pictures, trained through the API of a
real server on 127.0.0.1 (the local provider), the server and browser fixtures of
`test_dashboard_browser`. On the run's model page a picture is attached with the file
picker, shown, and sent with the prompt: the request carries it as a `data:` URL
`image_url` part of OpenAI's chat-completions format, the server answers 200 to both
sides and both answers are shown. The screenshot goes to the test's tmp dir.
"""

from __future__ import annotations

import base64
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_dashboard_browser as dashboard
from test_dashboard_browser import TOKEN, Server

browser, page = dashboard.browser, dashboard.page

pytestmark = [pytest.mark.browser, pytest.mark.ml]

REPO = Path(__file__).resolve().parents[2]
PICTURE = "train-red-circle-000.png"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The dashboard's server, with a small shapes dataset (one picture of each kind, no eval split: no scoring)."""
    with dashboard.serve(tmp_path_factory, TOKEN) as served:
        spec = importlib.util.spec_from_file_location(
            "make_shapes_dataset", REPO / "scripts" / "make_shapes_dataset.py"
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        folder = module.write(served.settings.datasets.datasets_dir / "shapes", train_per_class=1, eval_per_class=0)
        spec_file = folder / "dataset.toml"
        spec_file.write_text(spec_file.read_text().replace('eval = ["eval.jsonl"]\n', ""))
        (folder / "eval.jsonl").unlink()
        yield served


@pytest.fixture(scope="module")
def vision_run(server: Server) -> str:
    """A few steps of tiny-gemma3mm on the pictures: enough for a saved adapter that answers."""
    return server.train(
        {"dataset": "shapes", "model_size": "tiny-gemma3mm", "steps": 4, "warmup_steps": 0, "save_every": 4},
        limit_s=600,
    )


def test_the_playground_of_a_vision_run_sends_a_picture_and_shows_the_answers(
    page: Any, server: Server, vision_run: str, tmp_path: Path
) -> None:
    picture = server.settings.datasets.datasets_dir / "shapes" / "images" / PICTURE
    answers: list[int] = []
    page.on("response", lambda r: answers.append(r.status) if r.url.endswith("/v1/chat/completions") else None)
    page.evaluate("(id) => { location.hash = '#/models/' + id; }", vision_run)
    page.locator("#playground").wait_for()
    page.set_input_files("#pg-file", str(picture))
    page.wait_for_function("document.getElementById('pg-thumb').naturalWidth === 64")  # the shapes' size
    assert PICTURE in page.inner_text("#pg-picture-note")
    page.fill("#pg-prompt", "What is in the picture?")
    with page.expect_request(lambda r: r.url.endswith("/v1/chat/completions")) as first:
        page.click("#pg-send")
    for side in ("tuned", "base"):
        page.wait_for_function(
            f"/^(done|stopped at 64 tokens)/.test(document.getElementById('pg-{side}-status').textContent)",
            timeout=240_000,
        )
    sent = json.loads(first.value.post_data or "{}")
    data_url = "data:image/png;base64," + base64.b64encode(picture.read_bytes()).decode()
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in the picture?"},
                {"type": "image_url", "image_url": {"url": data_url}},
            ],
        }
    ]
    assert sent["model"] in (f"trained/{vision_run}", f"trained/{vision_run}:base")
    assert answers == [200, 200]  # the server took the picture for both sides
    # The answers are shown: the untrained base rambles; a run this short may end its turn at once (said so).
    assert page.inner_text("#pg-base").strip()
    if not page.inner_text("#pg-tuned").strip():
        assert "empty answer" in page.inner_text("#pg-tuned-status")
    assert "error-text" not in (page.get_attribute("#pg-tuned", "class") or "")
    page.screenshot(path=str(tmp_path / "vision-playground.png"), full_page=True)
