"""An eval report of image examples: the dashboard shows each example's picture beside its answers.

Headless Chromium against the real API server of `test_dashboard_browser` (its
fixtures). The report is stored the way the eval job stores it (`jobs/evaluate.py`):
its rows' image parts, paths on the dataset volume, become small PNG data URLs
(`with_thumbnails`) before `sets.write_report`. The page must show the picture itself
(its pixels read back from the page), in the example's row, next to the base and
tuned answers; a text example of the same report shows none.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import test_dashboard_browser as dashboard
from test_dashboard_browser import Server, shot

from trainkit_core import get_provider
from trainkit_core.ids import new_run_id

# The fixtures of the dashboard's browser tests: one server and browser per module here too.
server, browser, page = dashboard.server, dashboard.browser, dashboard.page

pytestmark = pytest.mark.browser

RED, BLUE = (220, 40, 40), (40, 70, 220)

#: The colour of the displayed picture at (x, y), read through a canvas of its natural size.
PIXEL = """([x, y]) => {
  const img = document.querySelector('#eval-examples tbody tr:first-child td:nth-child(2) img.eval-image');
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const context = canvas.getContext('2d');
  context.drawImage(img, 0, 0);
  return Array.from(context.getImageData(x, y, 1, 1).data.slice(0, 3));
}"""


def _picture(path: Path) -> Path:
    """A 256x128 picture, left half red and right half blue (the report keeps a 128 px thumbnail)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (256, 128), BLUE)
    ImageDraw.Draw(image).rectangle((0, 0, 127, 127), fill=RED)
    image.save(path, format="PNG")
    return path


def _answer(text: str, match: bool) -> dict[str, Any]:
    return {"answer": text, "stopped": True, "loss_sum": 2.0, "loss_tokens": 4, "exact_match": float(match)}


def test_an_image_example_shows_its_picture_beside_its_answers(page: Any, server: Server, tmp_path: Path) -> None:
    from trainkit_core.datasets.images import with_thumbnails
    from trainkit_core.evals import sets

    picture = _picture(tmp_path / "red-and-blue.png")
    question = {"type": "text", "text": "What is in the picture?"}
    rows = [
        {
            "index": 0,
            "messages": [
                {"role": "user", "content": [question, {"type": "image_url", "image_url": {"url": str(picture)}}]}
            ],
            "reference": "a red square",
            "base": _answer("a blue circle", False),
            "tuned": _answer("a red square", True),
        },
        {
            "index": 1,
            "messages": [{"role": "user", "content": "Name a colour."}],
            "reference": "red",
            "base": _answer("circle", False),
            "tuned": _answer("red", True),
        },
    ]
    summary = {"examples": 2, "mean_loss": 0.5, "exact_match": 1.0}
    report_id, run_id = sets.new_report_id(), new_run_id()
    report = {
        "report_id": report_id,
        "model_path": f"trained/{run_id}",
        "run_id": run_id,
        "base_model": "trainkit/tiny-gemma3mm",
        "dataset": "shapes",
        "created_at": time.time(),
        "example_count": 2,
        "tuned": summary,
        "base": {**summary, "exact_match": 0.0},
        "eval_s": 1.0,
    }
    volume = get_provider("local", server.settings).volume("eval")
    sets.write_report(volume, report, [with_thumbnails(row) for row in rows])

    page.goto(f"{server.url}/#/evals/{report_id}")
    examples = page.locator("#eval-examples tbody tr")
    examples.first.wait_for()
    assert examples.count() == 2
    image = examples.nth(0).locator("td").nth(1).locator("img.eval-image")
    assert image.count() == 1
    assert (image.get_attribute("src") or "").startswith("data:image/png;base64,")  # never fetched from elsewhere
    page.wait_for_function(
        "() => { const i = document.querySelector('#eval-examples img.eval-image'); return i && i.complete && i.naturalWidth > 0; }"
    )
    size = image.evaluate("(i) => [i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().width]")
    assert size[:2] == [128, 64] and size[2] > 0  # the thumbnail, decoded and laid out
    for (x, y), colour in (((16, 32), RED), ((112, 32), BLUE)):
        assert all(abs(a - b) <= 2 for a, b in zip(page.evaluate(PIXEL, [x, y]), colour, strict=True))

    cells = examples.nth(0).locator("td").all_inner_texts()
    assert "What is in the picture?" in cells[1] and cells[2] == "a red square"
    assert cells[3].startswith("a blue circle") and "no match" in cells[3]
    assert cells[4].startswith("a red square") and "exact match" in cells[4]
    assert examples.nth(1).locator("img").count() == 0  # a text example has no picture
    shot(page, "eval-report-image")
