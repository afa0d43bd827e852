"""The dashboard's files over HTTP: served without a token, nothing else under static/ reachable.

Torch-free and browser-free; `test_dashboard_browser*.py` drive the page itself.
"""

from __future__ import annotations

import re
from importlib import resources

import httpx
import pytest

from trainkit_api.dashboard import MEDIA_TYPES, STATIC_DIR

ASSETS = ("index.html", "app.js", "chart.js", "style.css", "favicon.svg")


def test_assets_ship_inside_the_package() -> None:
    package_files = resources.files("trainkit_api") / "static"
    for name in ASSETS:
        assert (package_files / name).is_file(), name
    assert STATIC_DIR.is_dir()


def test_page_and_assets_are_served_without_a_token(server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        html = page.text
        # Every asset the page links is served with its type, from this server (no CDN).
        linked = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
        assert sorted(linked) == sorted(
            f"/static/{name}" for name in ("favicon.svg", "style.css", "chart.js", "app.js")
        )
        for path in linked:
            answer = client.get(path)
            assert answer.status_code == 200, path
            assert answer.headers["content-type"] == MEDIA_TYPES["." + path.rsplit(".", 1)[1]]
            assert answer.headers["x-content-type-options"] == "nosniff"
        assert not re.search(r"https?://", html)
        # The data stays behind the token.
        assert client.get("/v1/runs").status_code == 401


def test_page_keeps_the_token_out_of_urls() -> None:
    """The script sends the token as a header only: never in a URL, and EventSource (headerless) is not used."""
    script = (STATIC_DIR / "app.js").read_text()
    assert "sessionStorage" in script and "Authorization" in script
    assert "new EventSource" not in script
    assert not re.search(r"[?&](token|access_token|api_token)=", script)
    for name in ASSETS:
        text = (STATIC_DIR / name).read_text()
        assert not re.search(r"(?:src|href|import|url)\s*\(?\s*[\"']?https?://", text), name


@pytest.mark.parametrize(
    "path",
    [
        "/static/../dashboard.py",
        "/static/..%2fdashboard.py",
        "/static/%2e%2e/dashboard.py",
        "/static/../../trainkit_core/settings.py",
        "/static//etc/passwd",
        "/static/%2fetc%2fpasswd",
        "/static/..\\dashboard.py",
        "/static/index.html%00.js",
        "/static/",
        "/static/missing.js",
        "/static/__init__.py",
    ],
)
def test_nothing_outside_static_is_served(server, path: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        answer = client.get(path)
    assert answer.status_code == 404, (path, answer.status_code)
    assert "import" not in answer.text and "root:" not in answer.text


@pytest.mark.parametrize(
    "name",
    [
        "../dashboard.py",
        "../../trainkit_core/settings.py",
        "/etc/passwd",
        "..\\dashboard.py",
        "index.html\x00.js",
        "",
        ".",
        "missing.js",
    ],
)
def test_static_file_refuses_names_that_leave_static(name: str) -> None:
    from fastapi import HTTPException

    from trainkit_api.dashboard import static_file

    with pytest.raises(HTTPException) as raised:
        static_file(name)
    assert raised.value.status_code == 404


def test_static_file_finds_the_assets() -> None:
    from trainkit_api.dashboard import static_file

    assert [static_file(name).name for name in ASSETS] == list(ASSETS)


def test_run_components_are_served_behind_the_token_and_sandboxed(server, tmp_path) -> None:
    run = server.new_run(status="succeeded")
    page = tmp_path / "report.html"
    page.write_text("<h1>hello</h1><script>parent.document.title = 'pwned'</script>")
    run.add_dashboard_component(name="report", component_type="html", from_path=page)
    data = tmp_path / "scores.json"
    data.write_text('{"f1": 0.5}')
    run.add_dashboard_component(name="scores", component_type="json", from_path=data)

    with server.client() as client:
        answer = client.get(f"/v1/runs/{run.id}/components/report")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/html")
        assert answer.headers["content-security-policy"].startswith("sandbox")
        assert answer.text == page.read_text()
        assert client.get(f"/v1/runs/{run.id}/components/scores").json() == {"f1": 0.5}
        missing = client.get(f"/v1/runs/{run.id}/components/nope")
        assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
        assert client.get(f"/v1/runs/{run.id}/components/..%2f..%2frecord").status_code in (404, 422)
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        assert anonymous.get(f"/v1/runs/{run.id}/components/report").status_code == 401


def test_a_folder_component_is_served_whole_and_file_by_file(server, tmp_path) -> None:
    run = server.new_run(status="succeeded")
    folder = tmp_path / "report"
    (folder / "img").mkdir(parents=True)
    (folder / "img" / "dot.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="2" height="1"/>')
    (folder / "index.html").write_text('<h1>Report</h1><img src="img/dot.svg">')
    run.add_dashboard_component(name="report", component_type="html", from_path=folder)
    (folder / "index.html").write_text('<h1>Report, take two</h1><img src="img/dot.svg">')
    run.add_dashboard_component(name="report", component_type="html", from_path=folder, replace=True)

    with server.client() as client:
        page = client.get(f"/v1/runs/{run.id}/components/report")
        assert page.status_code == 200 and "take two" in page.text
        assert '<img src="data:image/svg+xml;base64,' in page.text  # the frame showing it fetches nothing
        manifest = client.get(f"/v1/runs/{run.id}/components/report/manifest").json()
        assert manifest["version"] == 2 and manifest["entry"] == "index.html"
        assert set(manifest["files"]) == {"index.html", "img/dot.svg"}
        picture = client.get(f"/v1/runs/{run.id}/components/report/files/img/dot.svg")
        assert picture.headers["content-type"] == "image/svg+xml" and picture.text.startswith("<svg")
        assert picture.headers["content-security-policy"].startswith("sandbox")
        for bad in ("img/nope.svg", "../record.json", "..%2f..%2frecord.json"):
            assert client.get(f"/v1/runs/{run.id}/components/report/files/{bad}").status_code == 404, bad
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        assert anonymous.get(f"/v1/runs/{run.id}/components/report/files/img/dot.svg").status_code == 401


def test_the_dashboards_statuses_are_the_runs() -> None:
    """The page filters by the statuses a run can have; its list is a copy of core's one list."""
    import json as _json
    import re as _re

    from trainkit_api.dashboard import static_file
    from trainkit_core.runs.statuses import RUN_STATUSES

    listed = _re.search(r"const STATUSES = (\[[^\]]*\]);", static_file("app.js").read_text())
    assert listed and tuple(_json.loads(listed.group(1))) == RUN_STATUSES
