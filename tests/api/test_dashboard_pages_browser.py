"""The dashboard's pages as a newcomer met them, in headless Chromium.

Against the real API server of `test_dashboard_browser` (its fixtures: uvicorn on
127.0.0.1, the `local` provider, a token); the runs are written straight into the
store the way the training job writes them, so no torch is needed. Checked: the blue
Send button keeps its label readable under the mouse, a picture dropped on the
playground goes out as a `data:` URL part, the App page on `local` shows the provider
(no error box, no refused request), the empty pages show commands as code (no literal
backticks), the runs table names each run's method, a DPO run's rewards are in its
metrics table and events read as lines, not `key=value` dumps. Screenshots go to the
test's tmp dir (pytest's `--basetemp` to keep them).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
import test_dashboard_browser as dashboard
from test_dashboard_browser import TINY_PNG, Server, seed_run

from trainkit_core.plugins.hookspecs import Capabilities, DeploymentStatus, ProviderManifest, hookimpl

# The fixtures of the dashboard's browser tests: one server and browser per module here too.
server, browser, page = dashboard.server, dashboard.browser, dashboard.page

pytestmark = pytest.mark.browser


def shot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def _rgb(css: str) -> tuple[float, ...]:
    """'rgb(31, 111, 235)' or 'rgba(…, a)' -> the three channels (an opaque colour is expected)."""
    values = [float(v) for v in re.findall(r"[\d.]+", css)]
    assert len(values) == 3 or (len(values) == 4 and values[3] == 1.0), css
    return tuple(values[:3])


def _contrast(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """WCAG's contrast ratio of two sRGB colours (1 the same, 21 black on white)."""

    def luminance(rgb: tuple[float, ...]) -> float:
        c = [v / 255 for v in rgb]
        lin = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_hovered_send_button_keeps_its_label_readable(page: Any, server: Server, tmp_path: Path) -> None:
    run = seed_run(server, status="succeeded", losses=[7.0, 3.0])
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    send = page.locator("#pg-send")
    send.wait_for()
    style = "(b) => { const s = getComputedStyle(b); return [s.color, s.backgroundColor, b.matches(':hover')]; }"
    colour, background, hovered = send.evaluate(style)
    assert not hovered and _contrast(_rgb(colour), _rgb(background)) >= 4.5
    send.hover()
    colour, background, hovered = send.evaluate(style)
    assert hovered
    # White on the accent's darker blue, not white on the generic hover's pale grey (a ratio near 1).
    assert _contrast(_rgb(colour), _rgb(background)) >= 4.5, (colour, background)
    assert _rgb(background) != _rgb("rgb(238, 241, 244)")
    shot(page, tmp_path, "send-hovered")


def test_a_picture_dropped_on_the_playground_goes_out_as_a_data_url_part(
    page: Any, server: Server, tmp_path: Path
) -> None:
    """Dropped (as a user drags a file in), shown as a thumbnail, sent with the prompt in OpenAI's parts."""
    run = seed_run(server, status="succeeded", losses=[7.0, 3.0])  # no model files: both sides answer an error
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    page.locator("#pg-drop").wait_for()
    transfer = page.evaluate_handle(
        """(b64) => { const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        const t = new DataTransfer(); t.items.add(new File([bytes], 'dot.png', {type: 'image/png'})); return t; }""",
        base64.b64encode(TINY_PNG).decode(),
    )
    page.dispatch_event("#pg-drop", "dragover", {"dataTransfer": transfer})
    assert "dragover" in (page.get_attribute("#pg-drop", "class") or "")
    page.dispatch_event("#pg-drop", "drop", {"dataTransfer": transfer})
    page.wait_for_function("document.getElementById('pg-thumb').naturalWidth === 2")
    assert "dot.png" in page.inner_text("#pg-picture-note")
    page.fill("#pg-prompt", "What is in the picture?")
    with page.expect_request(lambda r: r.url.endswith("/v1/chat/completions")) as sent:
        page.click("#pg-send")
    content = sent.value.post_data_json["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": "What is in the picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(TINY_PNG).decode()}},
    ]
    page.wait_for_function("document.getElementById('pg-tuned-status').textContent === 'failed'")
    shot(page, tmp_path, "playground-picture-dropped")
    # Removed: the next prompt goes as text alone.
    page.click("#pg-remove")
    assert not page.locator("#pg-thumb").is_visible()
    with page.expect_request(lambda r: r.url.endswith("/v1/chat/completions")) as sent:
        page.click("#pg-send")
    assert sent.value.post_data_json["messages"][0]["content"] == "What is in the picture?"
    # Not a picture: said, and nothing attached.
    page.set_input_files("#pg-file", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello"}])
    page.wait_for_function("document.getElementById('pg-picture-note').textContent.includes('not a picture')")
    assert not page.locator("#pg-thumb").is_visible()


def test_the_app_page_on_local_shows_the_provider_without_an_error(page: Any, server: Server, tmp_path: Path) -> None:
    console: list[str] = []
    refused: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("response", lambda r: refused.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.click('a[data-nav="app"]')
    page.locator("#provider-facts").wait_for()
    assert page.inner_text('#provider-facts dd[data-field="Provider"]') == "local"
    assert "SQLite" in page.inner_text("#provider-card")  # the provider's own description
    capabilities = page.locator("#provider-capabilities li")
    assert page.get_attribute('#provider-capabilities li[data-capability="app_lifecycle"]', "class") == "cap no"
    assert page.get_attribute('#provider-capabilities li[data-capability="stop"]', "class") == "cap yes"
    assert capabilities.count() >= 5
    assert "trainkit-api" in page.inner_text("#provider-versions")
    assert page.locator("#view .alert").count() == 0
    assert not page.locator("#app-deploy").is_visible() and not page.locator("#app-stop").is_visible()
    page.wait_for_timeout(300)  # any late answer has arrived
    assert refused == [] and console == [], (refused, console)
    shot(page, tmp_path, "app-local")


def test_empty_pages_show_commands_as_code_not_backticks(
    browser: Any, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """A fresh server (no run at all, no token, as `trainkit serve` on loopback): the runs and sweeps pages' hints."""
    with dashboard.serve(tmp_path_factory, None) as fresh:
        context = browser.new_context(viewport={"width": 1280, "height": 600})
        tab = context.new_page()
        tab.goto(fresh.url + "/#/sweeps")
        tab.locator("#sweeps-empty").wait_for()
        assert "`" not in tab.inner_text("#view")
        assert tab.locator("#sweeps-empty code").all_inner_texts() == [
            "trainkit sweep --dataset NAME --grid lr=1e-3,1e-2"
        ]
        assert tab.inner_text("#sweeps-empty").startswith("No sweep yet. Start one with trainkit sweep")
        shot(tab, tmp_path, "sweeps-empty")
        tab.click('a[data-nav="runs"]')
        tab.locator("#runs-body .empty-state code").wait_for()
        assert "`" not in tab.inner_text("#view")
        assert tab.inner_text("#runs-body .empty-state code") == "trainkit train --dataset NAME"
        context.close()


def test_the_runs_table_names_each_runs_method(page: Any, server: Server, tmp_path: Path) -> None:
    runs = {
        method: seed_run(server, status="succeeded", losses=[1.0, 0.5], config={"method": method} if method else {})
        for method in ("sft", "dpo", "grpo", None)  # None: a record from before methods, an SFT run
    }
    # The table replaces the empty state on the dashboard's next poll: wait for every row first.
    for run in runs.values():
        page.locator(f'tr[data-run-id="{run.id}"] td').nth(2).wait_for()
    headers = page.locator("#runs-table thead th").all_inner_texts()
    assert headers[2].lower() == "method"
    for method, run in runs.items():
        cell = page.locator(f'tr[data-run-id="{run.id}"] td').nth(2)
        assert cell.inner_text() == (method or "sft").upper()
    shot(page, tmp_path, "runs-methods")


def test_a_dpo_runs_rewards_are_in_its_metrics_table_and_events_read_as_lines(
    page: Any, server: Server, tmp_path: Path
) -> None:
    run = seed_run(
        server,
        status="succeeded",
        losses=[],
        config={"method": "dpo"},
        metrics={"final_loss": 0.41, "train_runtime_s": 12.5},
    )
    for step in (1, 2, 3):
        run.events.append(
            "progress",
            step=step,
            total_steps=3,
            loss=0.7 / step,
            learning_rate=5e-6,
            rewards_chosen=0.1 * step,
            rewards_rejected=-0.2 * step,
            reward_margin=0.3 * step,
            reward_accuracy=0.5 + 0.1 * step,
        )
    run.events.append("checkpoint", step=3, path="checkpoints/step-3")
    run.events.append("log", message="loss mask checked on the tokenizer", examples=12, masked_tokens=340)
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    page.locator("#run-metrics").wait_for()
    page.wait_for_function("document.querySelector('#run-metrics tr[data-metric=reward_accuracy]') !== null")

    def values(group: str) -> dict[str | None, list[str]]:
        rows = page.locator(f'#run-metrics table[data-group="{group}"] tbody tr').all()
        return {row.get_attribute("data-metric"): row.locator("td").all_inner_texts() for row in rows}

    assert values("rewards") == {
        "rewards_chosen": ["reward of chosen", "0.3"],
        "rewards_rejected": ["reward of rejected", "-0.6"],
        "reward_margin": ["margin", "0.9"],
        "reward_accuracy": ["accuracy", "0.8"],
    }
    assert values("training") == {"final_loss": ["final loss", "0.41"], "train_runtime_s": ["train runtime", "12.5 s"]}

    page.check("#show-progress")
    page.locator("#event-log tr[data-type=progress]").first.wait_for()
    details = {
        row.get_attribute("data-type") + ":" + row.get_attribute("data-seq"): row.locator("td").nth(3).inner_text()
        for row in page.locator("#event-log tbody tr").all()
    }
    assert not [d for d in details.values() if "=" in d], details
    lines = list(details.values())
    assert "step 3 / 3 · loss 0.2333 · lr 5.00e-6 · reward of chosen 0.3" in " | ".join(lines)
    assert "saved at step 3: checkpoints/step-3" in lines
    assert "loss mask checked on the tokenizer · examples 12 · masked tokens 340" in lines
    shot(page, tmp_path, "run-dpo-metrics-events")


class _AppProvider:
    """A provider with an app lifecycle (as Modal's), its app kept in memory: the App page's other branch."""

    @hookimpl
    def provider_manifest(self) -> ProviderManifest:
        return ProviderManifest(name="appfake", capabilities=Capabilities(app_lifecycle=True))

    @hookimpl
    def provision(self, provider: str, settings: Any) -> object | None:
        if provider != "appfake":
            return None
        state = {"version": 0, "state": "not-deployed"}

        class Deployment:
            def check(self, functions: list[str]) -> None:
                pass

            def deploy(self) -> DeploymentStatus:
                state["version"] += 1
                state["state"] = "deployed"
                return self.status()

            def status(self) -> DeploymentStatus:
                detail = {
                    "app_name": "trainkit",
                    "app_id": "ap-fake1",
                    "version": state["version"],
                    "functions": ["train"],
                }
                url = "https://fake.example/api" if state["state"] == "deployed" else None
                return DeploymentStatus(state=str(state["state"]), detail=detail, url=url)

            def stop(self) -> None:
                state["state"] = "stopped"

        return Deployment()


def test_the_app_page_of_a_provider_with_an_app_shows_it_and_deploys_and_stops(browser: Any, tmp_path: Path) -> None:
    import threading
    import time

    import uvicorn

    from trainkit_api.app import create_app
    from trainkit_core.plugins.manager import build_plugin_manager, register
    from trainkit_core.plugins.provider import get_provider
    from trainkit_core.settings import ApiSettings, ProviderSettings, Settings

    settings = Settings(provider=ProviderSettings(home=tmp_path / "home"), api=ApiSettings(api_token=dashboard.TOKEN))
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, _AppProvider(), name="appfake", module=__name__)
    app = create_app(settings, provider=get_provider("appfake", settings, pm=pm))
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API server did not start"
        time.sleep(0.05)
    port = uv.servers[0].sockets[0].getsockname()[1]
    context = browser.new_context(viewport={"width": 1280, "height": 700})
    try:
        tab = context.new_page()
        tab.on("dialog", lambda dialog: dialog.accept())  # Stop asks to confirm
        tab.goto(f"http://127.0.0.1:{port}/#/app")
        tab.fill("#token-input", dashboard.TOKEN)
        tab.click("#token-form button[type=submit]")
        state = tab.locator('#app-status dd[data-field="State"]')
        state.wait_for()
        assert state.inner_text() == "not-deployed" and tab.locator("#provider-facts").count() == 0
        assert tab.locator("#app-deploy").is_enabled() and tab.locator("#app-stop").is_disabled()
        tab.click("#app-deploy")
        tab.wait_for_function("document.querySelector('#app-status dd[data-field=State]').textContent === 'deployed'")
        assert tab.inner_text('#app-status dd[data-field="Web API"]') == "https://fake.example/api"
        assert "null" not in tab.inner_text("#app-status")  # nothing missing: no stray text where its alert goes
        shot(tab, tmp_path, "app-deployed")
        tab.click("#app-stop")
        tab.wait_for_function("document.querySelector('#app-status dd[data-field=State]').textContent === 'stopped'")
        assert tab.locator("#view .alert").count() == 0
    finally:
        context.close()
        uv.should_exit = True
        thread.join(timeout=15)
