"""The playground of an audio run takes a sound, in headless Chromium.

A tiny-gemma4-e run of 30 steps on a small tones dataset (`scripts/make_tones_dataset.py`),
trained through the API of a real server on 127.0.0.1 (the local provider), the server
and browser fixtures of `test_dashboard_browser`. On the run's model page a sound the run
never saw is attached with the file picker, shown as an `<audio>` player, and sent with the
prompt: the request carries it as an `input_audio` part of OpenAI's chat-completions format
(the file's bytes in base64, format "wav"), the server answers 200 to both sides and both
answers are shown. A file that is no sound is refused in the page, and a sound the server
refuses (a WAV cut short) shows the server's message on both sides; these two use a run
seeded in the store (the server checks a sound before it looks for the model). The
screenshot goes to the test's tmp dir.
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
from test_dashboard_browser import TOKEN, Server, seed_run

browser, page = dashboard.browser, dashboard.page

pytestmark = [pytest.mark.browser, pytest.mark.ml]

REPO = Path(__file__).resolve().parents[2]
SOUND = "unseen-high-2.wav"  # in no line of the dataset
QUESTION = "What do you hear?"
CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The dashboard's server, with a small tones dataset (20 sounds of each kind, one each to score)."""
    with dashboard.serve(tmp_path_factory, TOKEN) as served:
        spec = importlib.util.spec_from_file_location("make_tones_dataset", REPO / "scripts" / "make_tones_dataset.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.write(served.settings.datasets.datasets_dir / "tones", train_per_class=20, eval_per_class=1)
        yield served


@pytest.fixture(scope="module")
def audio_run(server: Server) -> str:
    """tiny-gemma4-e on the tones, 30 steps: a saved adapter that answers (what it says is not checked here)."""
    return server.train({"dataset": "tones", "model_size": "tiny-gemma4-e", "steps": 30, "save_every": 30}, limit_s=900)


def sound_file(server: Server) -> Path:
    return server.settings.datasets.datasets_dir / "tones" / "audio" / SOUND


def fmt_bytes(n: int) -> str:
    """The size as the dashboard's `fmtBytes` writes it (files under a megabyte here)."""
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB"


def chat_requests(page: Any) -> list[dict[str, Any]]:
    """The bodies of the page's chat-completion requests, as they are sent (the list fills)."""
    sent: list[dict[str, Any]] = []
    page.on("request", lambda r: sent.append(json.loads(r.post_data or "{}")) if r.url.endswith(CHAT) else None)
    return sent


def test_the_playground_of_an_audio_run_sends_a_sound_and_shows_the_answers(
    page: Any, server: Server, audio_run: str, tmp_path: Path
) -> None:
    sound = sound_file(server)
    sent = chat_requests(page)
    answers: list[int] = []
    page.on("response", lambda r: answers.append(r.status) if r.url.endswith(CHAT) else None)
    page.evaluate("(id) => { location.hash = '#/models/' + id; }", audio_run)
    page.locator("#playground").wait_for()
    page.set_input_files("#pg-file", str(sound))
    page.locator("#pg-audio").wait_for(state="visible")
    page.wait_for_function("document.getElementById('pg-audio').duration > 0")  # the browser reads it as a sound
    assert page.locator("#pg-thumb").is_hidden()
    note = page.inner_text("#pg-picture-note")
    assert SOUND in note and fmt_bytes(sound.stat().st_size) in note, note
    page.fill("#pg-prompt", QUESTION)
    page.click("#pg-send")
    for side in ("tuned", "base"):
        page.wait_for_function(
            f"/^(done|stopped at 64 tokens)/.test(document.getElementById('pg-{side}-status').textContent)",
            timeout=240_000,
        )
    part = {
        "type": "input_audio",
        "input_audio": {"data": base64.b64encode(sound.read_bytes()).decode(), "format": "wav"},
    }
    assert len(sent) == 2
    for body in sent:
        assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": QUESTION}, part]}]
    assert sorted(body["model"] for body in sent) == [f"trained/{audio_run}", f"trained/{audio_run}:base"]
    assert answers == [200, 200]  # the server took the sound for both sides
    assert page.inner_text("#pg-tuned").strip()  # the tuned model says something
    assert page.inner_text("#pg-base").strip()
    for side in ("tuned", "base"):
        assert "error-text" not in (page.get_attribute(f"#pg-{side}", "class") or "")
        assert "failed" not in page.inner_text(f"#pg-{side}-status")
    page.screenshot(path=str(tmp_path / "audio-playground.png"), full_page=True)


def test_a_file_that_is_no_sound_is_refused_in_the_page(page: Any, server: Server, tmp_path: Path) -> None:
    run = seed_run(server, status="succeeded", losses=[7.0, 3.0])
    notes = tmp_path / "notes.txt"
    notes.write_text("two high beeps\n")
    sent = chat_requests(page)
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    page.locator("#playground").wait_for()
    page.set_input_files("#pg-file", str(notes))
    page.wait_for_function("document.getElementById('pg-picture-note').classList.contains('error-text')")
    assert "notes.txt is not a picture or a .wav or .mp3 sound (text/plain)" in page.inner_text("#pg-picture-note")
    assert page.locator("#pg-audio").is_hidden() and page.locator("#pg-thumb").is_hidden()
    assert sent == []
    # Sent now, the prompt goes alone: the refused file does not ride along.
    page.fill("#pg-prompt", QUESTION)
    page.click("#pg-send")
    page.wait_for_function("document.getElementById('pg-tuned-status').textContent === 'failed'")  # no model files
    assert [body["messages"] for body in sent] == [[{"role": "user", "content": QUESTION}]] * 2


def test_a_sound_the_server_refuses_shows_its_message(page: Any, server: Server, tmp_path: Path) -> None:
    run = seed_run(server, status="succeeded", losses=[7.0, 3.0])
    whole = sound_file(server).read_bytes()
    cut = tmp_path / "cut.wav"
    cut.write_bytes(whole[: len(whole) // 2])  # its header promises more samples than follow
    answers: list[int] = []
    page.on("response", lambda r: answers.append(r.status) if r.url.endswith(CHAT) else None)
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    page.locator("#playground").wait_for()
    page.set_input_files("#pg-file", str(cut))
    page.locator("#pg-audio").wait_for(state="visible")
    page.fill("#pg-prompt", QUESTION)
    page.click("#pg-send")
    for side in ("tuned", "base"):
        page.wait_for_function(f"document.getElementById('pg-{side}-status').textContent === 'failed'")
        shown = page.inner_text(f"#pg-{side}")
        assert "messages[0].content[1]" in shown and "cut short" in shown, shown
        assert "error-text" in (page.get_attribute(f"#pg-{side}", "class") or "")
    assert answers == [400, 400]
    assert page.locator("#pg-send").is_enabled()
