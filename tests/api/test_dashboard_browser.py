"""The dashboard in headless Chromium against a real uvicorn server on 127.0.0.1.

Debian's `chromium` driven by Playwright (never `playwright install`: it downloads a
browser). The live test trains a real tiny run through the local provider and watches
it from the page: the run is listed as running, its loss curve gains points without a
reload, Stop stops it and the page shows it stopped. The other tests read runs written
straight into the store (the format the training callback writes) and need no torch.
Screenshots go to `test-artifacts/dashboard/` (git-ignored).

Skipped when Playwright or Chromium is missing, unless TRAINKIT_REQUIRE_BROWSER=1 (set
by the `browser` nox session), which turns the skip into a failure.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from trainkit_core import get_provider
from trainkit_core.errors import ConflictError
from trainkit_core.ids import new_run_id
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import ApiSettings, DatasetSettings, ProviderSettings, Settings

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"
CHROMIUM = os.environ.get("TRAINKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "dashboard-token-9c41"


def _missing(what: str) -> None:
    if os.environ.get("TRAINKIT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{what} (TRAINKIT_REQUIRE_BROWSER=1)")
    pytest.skip(what)


#: The statuses a run ends in.
ENDED = ("succeeded", "failed", "stopped")


@dataclass
class Server:
    url: str
    settings: Settings

    @property
    def store(self) -> RunStore:
        return RunStore.for_provider(get_provider("local", self.settings))

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)

    def train(self, body: dict[str, Any], limit_s: float) -> str:
        """Start a run through the API and wait for it to succeed; its id."""
        with self.client() as client:
            created = client.post("/v1/runs", json=body)
            assert created.status_code == 201, created.text
            run_id = str(created.json()["id"])
            deadline = time.monotonic() + limit_s
            while (record := client.get(f"/v1/runs/{run_id}").json())["status"] not in ENDED:
                assert time.monotonic() < deadline, record
                time.sleep(1)
        assert record["status"] == "succeeded", record.get("error_message") or record
        return run_id


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The API with its dashboard, on a free port of 127.0.0.1, with the demo dataset at hand."""
    with serve(tmp_path_factory, TOKEN) as served:
        yield served


@contextlib.contextmanager
def serve(tmp_path_factory: pytest.TempPathFactory, token: str | None) -> Iterator[Server]:
    """The API and its dashboard in a uvicorn thread; `token` None: an open API, as `trainkit serve` on loopback."""
    import uvicorn

    from trainkit_api.app import create_app

    home = tmp_path_factory.mktemp("dashboard-home")
    datasets = tmp_path_factory.mktemp("datasets")
    shutil.copytree(ROOT / "datasets" / "demo", datasets / "demo")
    settings = Settings(
        provider=ProviderSettings(home=home),
        api=ApiSettings(api_token=token),
        datasets=DatasetSettings(datasets_dir=datasets),
    )
    app = create_app(settings, provider=get_provider("local", settings))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uv = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2)
    )
    thread = threading.Thread(target=uv.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API server did not start"
        time.sleep(0.05)
    served = Server(f"http://127.0.0.1:{port}", settings)
    try:
        yield served
    finally:
        uv.should_exit = True
        thread.join(timeout=15)
        # No worker may outlive the tests (its home is a temporary folder): end what still runs.
        for run in served.store.list():
            if not run.done():
                with contextlib.suppress(ConflictError):  # it ended meanwhile
                    run.cancel()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install playwright; never `playwright install`)")
    if not Path(CHROMIUM).exists():
        _missing(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    """A fresh tab, signed in; page errors fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.set_default_timeout(30_000)
    tab.goto(server.url + "/")
    tab.locator("#token-dialog").wait_for(state="visible")
    tab.fill("#token-input", TOKEN)
    tab.click("#token-form button[type=submit]")
    tab.locator("#token-dialog").wait_for(state="hidden")
    yield tab
    context.close()
    assert errors == [], errors


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def series_points(page: Any, box: str) -> int:
    """Points of the curve drawn in chart `box` (the count the chart writes on its path)."""
    value = page.evaluate(
        "(box) => { const p = document.querySelector(box + ' path.series'); return p ? Number(p.dataset.points) : 0; }",
        box,
    )
    return int(value)


def seed_run(server: Server, *, status: str, losses: list[float], **fields: Any) -> TrainingRun:
    """A run record and its events, written the way the training callback writes them."""
    now = time.time()
    run = TrainingRun(
        id=new_run_id(),
        provider="local",
        framework="hf",
        status=status,
        phase="done" if status == "succeeded" else "training",
        dataset_id="demo",
        created_at=now - 60,
        started_at=now - 55,
        ended_at=now - 5,
        step=len(losses),
        total_steps=fields.pop("total_steps", len(losses)),
        **fields,
    )
    run.attach(server.store).save()
    run.events.append("phase", phase="training")
    for step, loss in enumerate(losses, start=1):
        run.events.append("progress", step=step, loss=loss, learning_rate=run.config.get("learning_rate", 1e-2))
    run.events.append("status", status=status)
    return run


# --------------------------------------------------------------------------- no torch


def test_a_server_without_a_token_is_not_asked_for_one(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """`trainkit serve` on loopback without TRAINKIT_API_TOKEN: the dashboard opens on the runs, no dialog."""
    with serve(tmp_path_factory, None) as open_server:
        run = seed_run(open_server, status="succeeded", losses=[7.0, 3.0])
        context = browser.new_context()
        tab = context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.goto(open_server.url + "/")
        tab.locator(f'tr[data-run-id="{run.id}"]').wait_for()
        tab.wait_for_function("document.getElementById('server-info').textContent.includes('local')")
        assert not tab.locator("#token-dialog").is_visible()
        assert not tab.locator("#signout").is_visible()  # no token to forget
        assert tab.evaluate("sessionStorage.getItem('trainkit.token')") is None
        context.close()
        assert errors == [], errors


def test_the_playground_of_a_run_without_a_model_says_why(page: Any, server: Server) -> None:
    """A succeeded run whose model files are gone: both sides answer with the server's error, nothing hangs."""
    run = seed_run(server, status="succeeded", losses=[7.0, 3.0])
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    page.locator("#playground").wait_for()
    page.fill("#pg-prompt", "Opposites: hot big")
    page.click("#pg-send")
    for side in ("tuned", "base"):
        page.wait_for_function(f"document.getElementById('pg-{side}-status').textContent === 'failed'")
        assert run.id in page.inner_text(f"#pg-{side}")
    assert page.locator("#pg-send").is_enabled()
    page.evaluate("(id) => { location.hash = '#/models/' + id; }", run.id)
    page.wait_for_function("document.getElementById('view').textContent.includes('no trained model')")


def test_a_server_with_a_token_asks_for_it(browser: Any, server: Server) -> None:
    context = browser.new_context()
    tab = context.new_page()
    tab.goto(server.url + "/")
    tab.locator("#token-dialog").wait_for(state="visible")
    assert not tab.locator("#token-error").is_visible()  # asked, not yet refused
    context.close()


def test_wrong_token_is_refused_and_a_good_one_is_kept_for_the_session(browser: Any, server: Server) -> None:
    context = browser.new_context()
    tab = context.new_page()
    tab.goto(server.url + "/")
    tab.fill("#token-input", "wrong")
    tab.click("#token-form button[type=submit]")
    tab.locator("#token-error").wait_for(state="visible")
    assert "refused" in tab.inner_text("#token-error")
    assert "wrong" not in tab.url
    tab.fill("#token-input", TOKEN)
    tab.click("#token-form button[type=submit]")
    tab.locator("#runs-body").wait_for()
    assert tab.evaluate("sessionStorage.getItem('trainkit.token')") == TOKEN
    tab.reload()  # same tab session: not asked again
    tab.locator("#runs-body").wait_for()
    assert not tab.locator("#token-dialog").is_visible()
    assert TOKEN not in tab.url
    context.close()


def test_a_401_to_a_request_sent_before_signing_in_does_not_ask_again(browser: Any, server: Server) -> None:
    """The page sends the header's info and the view's list at once; both are refused
    until the token is given. A refusal that arrives after signing in answers the old,
    tokenless request: the dialog must stay closed, or it blocks the page (CI met this)."""
    context = browser.new_context()
    tab = context.new_page()
    held: list[Any] = []
    tab.route("**/v1/info", lambda route: route.continue_() if held else held.append(route))  # hold the first
    tab.goto(server.url + "/")
    tab.locator("#token-dialog").wait_for(state="visible")  # asked by the runs list's 401
    tab.fill("#token-input", TOKEN)
    tab.click("#token-form button[type=submit]")
    tab.locator("#runs-body").wait_for()
    stale = held[0]
    assert "authorization" not in stale.request.headers  # sent before there was a token
    # Only the held request's answer: the signed-in page's own /v1/info may answer meanwhile.
    with tab.expect_response(
        lambda r: r.request.url == stale.request.url and "authorization" not in r.request.headers
    ) as refused:
        stale.continue_()
    assert refused.value.status == 401
    tab.wait_for_timeout(300)  # the page's handler of that answer has run by now
    assert not tab.locator("#token-dialog").is_visible()
    tab.click('a[data-nav="sweeps"]')  # nothing over the page
    tab.wait_for_function("location.hash === '#/sweeps'")
    context.close()


def test_failed_run_shows_its_error_and_the_table_filters(page: Any, server: Server) -> None:
    group = f"g-{time.time_ns()}"
    failed = seed_run(
        server,
        status="failed",
        losses=[7.0, 6.0, 5.5],
        total_steps=300,
        error_message="RuntimeError: CUDA out of memory (tried to allocate 2.00 GiB)",
    )
    ok = seed_run(
        server, status="succeeded", losses=[7.0, 3.0], metadata={"group_id": group}, metrics={"final_loss": 3.0}
    )

    page.locator(f'tr[data-run-id="{failed.id}"]').wait_for()
    page.select_option("#filter-status", "failed")
    page.locator(f'tr[data-run-id="{ok.id}"]').wait_for(state="detached")
    assert page.locator(f'tr[data-run-id="{failed.id}"]').is_visible()
    page.select_option("#filter-status", "")
    page.select_option("#filter-group", group)
    page.locator(f'tr[data-run-id="{failed.id}"]').wait_for(state="detached")
    row = page.locator(f'tr[data-run-id="{ok.id}"]')
    assert "3" in row.inner_text() and "succeeded" in row.inner_text()
    page.select_option("#filter-group", "")

    page.click(f'a[href="#/runs/{failed.id}"]')
    page.locator("#error-text").wait_for()
    assert "CUDA out of memory" in page.inner_text("#error-text")
    assert page.locator("#run-status [data-status=failed]").is_visible()
    assert page.locator("#stop-btn").is_disabled() and page.locator("#resume-btn").is_enabled()
    page.wait_for_function("document.querySelector('#loss-chart path.series')?.dataset.points === '3'")
    shot(page, "failed-run")
    # Resume asks the server, which refuses (no checkpoint to resume from): the page says why.
    page.click("#resume-btn")
    page.wait_for_function("document.querySelector('#action-msg').textContent.startsWith('resume failed')")
    assert "no complete checkpoint" in page.inner_text("#action-msg")
    assert page.locator("#resume-btn").is_enabled()


def test_run_page_names_its_app_and_the_app_page_shows_local_has_none(page: Any, server: Server) -> None:
    run = seed_run(
        server,
        status="succeeded",
        losses=[7.0, 3.0],
        app_name="trainkit",
        provider_app_id="ap-abc123",
        provider_app_url="https://modal.com/id/ap-abc123",
        deployment_id="ap-abc123/v2",
    )
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    deployment = page.locator('#run-summary dd[data-field="Deployment"]')
    deployment.wait_for()
    assert deployment.inner_text() == "ap-abc123/v2"
    assert page.locator('#run-summary dd[data-field="App"] a').get_attribute("href") == "https://modal.com/id/ap-abc123"

    page.click('a[data-nav="app"]')  # local has no app: the page shows the provider, without asking /v1/app
    page.locator("#app-status #provider-facts").wait_for()
    assert page.inner_text('#provider-facts dd[data-field="App"]') == "none: nothing to deploy"
    assert page.locator("#app-status .alert").count() == 0
    assert not page.locator("#app-deploy").is_visible() and not page.locator("#app-stop").is_visible()


def test_sweep_page_overlays_the_group_and_compares(page: Any, server: Server) -> None:
    group = f"sweep-{time.time_ns()}"
    runs = [
        seed_run(
            server,
            status="succeeded",
            losses=[0.4 + 6.8 * math.exp(-step * lr * 30) for step in range(1, 81)],
            config={"learning_rate": lr, "lora_r": 8, "model_size": "tiny"},
            metadata={"group_id": group},
            duration_seconds=1800.0,
            price={"provider": "modal", "gpu": "A10G", "gpus": 1, "usd_per_hour": 1.0},
        )
        for lr in (1e-3, 3e-3, 1e-2)
    ]
    page.goto(f"{server.url}/#/sweeps/{group}")
    page.wait_for_function("document.querySelectorAll('#sweep-chart path.series').length === 3")
    labels = page.eval_on_selector_all(
        "#sweep-chart path.series", "ps => ps.map(p => [p.dataset.series, p.dataset.points])"
    )
    assert sorted(labels) == sorted([f"learning_rate={lr}", "80"] for lr in (0.001, 0.003, 0.01))
    rows = page.locator("#sweep-table tbody tr")
    assert rows.count() == 3
    best = page.locator("#sweep-table tbody tr.best")
    assert runs[2].id in best.inner_text()  # the highest learning rate ends lowest
    headers = page.locator("#sweep-table thead th").all_inner_texts()
    assert [h.lower() for h in headers][2] == "learning_rate"  # only what the sweep varied
    assert headers[-1].lower() == "cost" and "$0.5000" in best.inner_text()  # half an hour of a $1/h GPU
    assert page.locator("#sweep-total").inner_text().split()[-1] == "$1.50"  # the group's total
    shot(page, "sweep")


def test_eval_report_shows_base_vs_tuned_with_the_examples(page: Any, server: Server) -> None:
    from trainkit_core.evals import sets

    def side(answers: list[str], references: list[str], loss: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        rows: list[dict[str, Any]] = [
            {
                "answer": a,
                "stopped": True,
                "loss_sum": loss * 4,
                "loss_tokens": 4,
                "exact_match": float(a == r),
                "f1": float(a == r),
            }
            for a, r in zip(answers, references, strict=True)
        ]
        n = len(rows)
        summary = {
            "examples": n,
            "mean_loss": loss,
            "perplexity": round(math.exp(loss), 4),
            "exact_match": sum(r["exact_match"] for r in rows) / n,
            "f1": sum(r["f1"] for r in rows) / n,
        }
        return summary, rows

    prompts = ["make it loud: red fox", "make it loud: blue sky", "make it loud: tall tree"]
    references = ["RED FOX", "BLUE SKY", "TALL TREE"]
    tuned, tuned_rows = side(["RED FOX", "BLUE SKY", "TALL TRE"], references, 0.4)
    base, base_rows = side(["red", "fox fox", "ok"], references, 7.2)
    report_id = sets.new_report_id()
    run_id = new_run_id()
    report = {
        "report_id": report_id,
        "model_path": f"trained/{run_id}",
        "run_id": run_id,
        "base_model": "trainkit/tiny-gemma3",
        "dataset": "demo",
        "created_at": time.time(),
        "example_count": 3,
        "tuned": tuned,
        "base": base,
        "eval_s": 2.5,
    }
    rows = [
        {"index": i, "messages": [{"role": "user", "content": p}], "reference": r, "tuned": t, "base": b}
        for i, (p, r, t, b) in enumerate(zip(prompts, references, tuned_rows, base_rows, strict=True))
    ]
    sets.write_report(get_provider("local", server.settings).volume("eval"), report, rows)

    page.goto(f"{server.url}/#/evals/{report_id}")
    page.locator("#eval-metrics").wait_for()
    metrics = {
        row.get_attribute("data-metric"): row.locator("td").all_inner_texts()
        for row in page.locator("#eval-metrics tbody tr").all()
    }
    assert list(metrics) == ["mean_loss", "perplexity", "exact_match", "f1"]
    assert metrics["mean_loss"][1:3] == ["7.2", "0.4"]
    assert metrics["exact_match"][1:3] == ["0", "0.6667"]
    # lower loss and higher exact match are both improvements
    assert "better" in page.get_attribute('#eval-metrics tr[data-metric="mean_loss"] td:last-child', "class")
    assert "better" in page.get_attribute('#eval-metrics tr[data-metric="exact_match"] td:last-child', "class")
    examples = page.locator("#eval-examples tbody tr")
    assert examples.count() == 3
    first = examples.nth(0).locator("td").all_inner_texts()
    assert "make it loud: red fox" in first[1] and first[2] == "RED FOX"
    assert first[3].startswith("red") and "no match" in first[3]
    assert first[4].startswith("RED FOX") and "exact match" in first[4]
    assert page.locator(f'a[href="#/runs/{run_id}"]').is_visible()
    shot(page, "eval-report")


# A 2x1 PNG (one red, one blue pixel).
TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAAEElEQVR4nGP4z8DAwPCfAQAL/wH/kZ6pVAAAAABJRU5ErkJggg=="
)


def test_attached_components_are_shown_and_html_cannot_script(page: Any, server: Server, tmp_path: Path) -> None:
    run = seed_run(server, status="succeeded", losses=[7.0, 5.0, 3.0])
    files = {
        "curve": ("png", TINY_PNG),
        "scores": ("json", b'{"exact_match": 0.9, "f1": 0.95}'),
        "notes": (
            "html",
            b"<h1>Notes</h1><script>parent.document.title = 'pwned'; top.location = 'about:blank'</script>",
        ),
    }
    for name, (kind, data) in files.items():
        path = tmp_path / f"{name}.{kind}"
        path.write_bytes(data)
        run.add_dashboard_component(name=name, component_type=kind, from_path=path)
    # A folder: a report whose page loads its own style sheet and picture.
    report = tmp_path / "report"
    report.mkdir()
    (report / "index.html").write_text('<link rel="stylesheet" href="style.css"><h1>Report</h1><img src="dot.png">')
    (report / "style.css").write_text("h1 { color: rgb(200, 0, 0); }")
    (report / "dot.png").write_bytes(TINY_PNG)
    run.add_dashboard_component(name="report", component_type="html", from_path=report)

    page.goto(f"{server.url}/#/runs/{run.id}")
    page.wait_for_function("document.querySelector('figure[data-component=curve] img')?.naturalWidth === 2")
    assert '"f1": 0.95' in page.inner_text("figure[data-component=scores] pre")
    frame = page.frame_locator("figure[data-component=notes] iframe")
    assert frame.locator("h1").inner_text() == "Notes"
    assert page.get_attribute("figure[data-component=notes] iframe", "sandbox") == ""
    assert page.title() == "trainkit" and page.url.startswith(server.url)  # its script never ran
    page.wait_for_selector("figure[data-component=report] iframe")
    folder = page.locator("figure[data-component=report] iframe").element_handle().content_frame()
    folder.wait_for_function("document.querySelector('img')?.naturalWidth === 2")  # the picture inlined
    assert folder.evaluate("getComputedStyle(document.querySelector('h1')).color") == "rgb(200, 0, 0)"
    assert "3 files" in page.inner_text("figure[data-component=report] figcaption")
    shot(page, "components")


# --------------------------------------------------------------------------- a real tiny run


@pytest.mark.ml
def test_live_run_gains_points_and_stops_from_the_page(page: Any, server: Server) -> None:
    with server.client() as client:
        answer = client.post(
            "/v1/runs", json={"dataset": "demo", "model_size": "tiny", "steps": 600, "save_every": 100}
        )
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
    try:
        requests: list[Any] = []
        page.on("request", lambda request: requests.append(request))
        # The runs table lists it as running (it reloads the list by itself).
        page.goto(server.url + "/#/")
        page.locator(f'tr[data-run-id="{run_id}"][data-status=running]').wait_for(timeout=240_000)
        shot(page, "runs-running")

        page.click(f'a[href="#/runs/{run_id}"]')
        page.locator("#run-status [data-status=running]").wait_for()
        page.evaluate("window.__sameDocument = true")  # gone if the page reloads
        page.wait_for_function(
            "document.querySelector('#loss-chart path.series')?.dataset.points >= 2", timeout=240_000, polling=200
        )
        first = series_points(page, "#loss-chart")
        page.wait_for_function(
            f"document.querySelector('#loss-chart path.series')?.dataset.points > {first + 2}",
            timeout=120_000,
            polling=200,
        )
        assert series_points(page, "#loss-chart") > first + 2
        assert series_points(page, "#lr-chart") > 0
        assert page.evaluate("window.__sameDocument") is True
        # The points came over the event stream, read with fetch: the token in a header, never in a URL.
        streams = [r for r in requests if r.url.split("?")[0].endswith(f"/v1/runs/{run_id}/events/stream")]
        assert streams and all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in streams)
        assert not any(TOKEN in r.url for r in requests)
        shot(page, "run-live")

        page.click("#stop-btn")
        page.locator("#run-status [data-status=stopped]").wait_for(timeout=240_000)
        assert page.evaluate("window.__sameDocument") is True
        assert page.locator("#stop-btn").is_disabled() and page.locator("#resume-btn").is_enabled()
        with server.client() as client:
            record = client.get(f"/v1/runs/{run_id}").json()
        assert record["status"] == "stopped"
        # It stopped early, and every loss the run reported is on the curve.
        assert record["step"] < 600
        with server.client() as client:
            events = client.get(f"/v1/runs/{run_id}/events", params={"limit": 10_000}).json()["data"]
        losses = {e["step"] for e in events if e["type"] == "progress" and e.get("loss") is not None}
        page.wait_for_function(f"document.querySelector('#loss-chart path.series')?.dataset.points == {len(losses)}")
        page.locator("#event-log tr[data-type=status]").last.wait_for()
        shot(page, "run-stopped")

        page.click("a[href='#/']")
        page.locator(f'tr[data-run-id="{run_id}"][data-status=stopped]').wait_for()
        shot(page, "runs-stopped")

        # A stopped run still saved its adapter: the models page lists it.
        page.click("a[data-nav=models]")
        page.locator(f'#models-table tr[data-model="trained/{run_id}"]').wait_for()
        shot(page, "models")

        # Its page has the playground: the tuned and the base answer stream side by side.
        page.click(f'#models-table a[href="#/models/{run_id}"]')
        page.locator("#model-summary").wait_for()
        page.evaluate(
            """() => { window.__pieces = {tuned: 0, base: 0};
            for (const side of ['tuned', 'base']) new MutationObserver((records) => { window.__pieces[side] += records.length; })
              .observe(document.getElementById('pg-' + side), {childList: true, characterData: true, subtree: true}); }"""
        )
        page.fill("#pg-prompt", "Opposites: hot big")
        page.click("#pg-send")
        for side in ("tuned", "base"):
            page.wait_for_function(
                f"/^(done|stopped at 64 tokens)/.test(document.getElementById('pg-{side}-status').textContent)",
                timeout=240_000,
            )
        # A run stopped this early may end its turn at once (the page says so); the base rambles on.
        tuned, base = page.inner_text("#pg-tuned"), page.inner_text("#pg-base")
        assert base.strip() and tuned != base
        if not tuned.strip():
            assert "empty answer" in page.inner_text("#pg-tuned-status")
        assert page.evaluate("window.__pieces.base") >= 2  # filled piece by piece from the stream
        chats = [r for r in requests if r.url.endswith("/v1/chat/completions")]
        models = sorted(json.loads(r.post_data)["model"] for r in chats)
        assert models == [f"trained/{run_id}", f"trained/{run_id}:base"]
        assert all(json.loads(r.post_data)["stream"] is True for r in chats)
        assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in chats)
        shot(page, "model-playground")

    finally:
        with server.client() as client:
            client.post(f"/v1/runs/{run_id}/stop")  # never leave a worker training after a failure
