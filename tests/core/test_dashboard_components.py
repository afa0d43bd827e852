"""Dashboard components: a file or a folder, stored as immutable versions, replaced by pointer, collected by gc.

On the local provider's real volume and SQLite store (torch-free).
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import ConflictError, NotFoundError, UsageError
from trainkit_core.runs import components
from trainkit_core.runs.paths import components_dir
from trainkit_core.runs.retention import GC_GRACE_S, collect_garbage
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import ProviderSettings, Settings

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAAEElEQVR4nGP4z8DAwPCfAQAL/wH/kZ6pVAAAAABJRU5ErkJggg=="
)


@pytest.fixture
def provider(trainkit_home: Path) -> Any:
    return get_provider("local", Settings(provider=ProviderSettings(home=trainkit_home)))


@pytest.fixture
def store(provider: Any) -> RunStore:
    return RunStore.for_provider(provider)


def _run(store: RunStore, status: str = "running") -> TrainingRun:
    run = TrainingRun(id="run-20261205-120000-abcdef", provider="local", status=status, created_at=time.time())
    run.attach(store).save()
    return run


def _report(folder: Path, title: str = "Report") -> Path:
    """An HTML report as tools write them: a page, its style sheet, a picture in a subfolder."""
    (folder / "img").mkdir(parents=True)
    (folder / "img" / "dot.png").write_bytes(PNG)
    (folder / "style.css").write_text("h1 { color: rgb(200, 0, 0); } body { background: url('img/dot.png'); }")
    (folder / "index.html").write_text(
        f'<link rel="stylesheet" href="style.css"><h1>{title}</h1><img src="img/dot.png" alt="dot">'
        '<a href="https://example.org/x">out</a><img src="../outside.png">'
    )
    return folder


def _stored_files(store: RunStore, run_id: str) -> set[str]:
    root = Path(store.models.root) / components_dir(run_id)  # type: ignore[attr-defined]
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def test_a_folder_is_one_version_whose_page_needs_nothing_else(store: RunStore, tmp_path: Path) -> None:
    run = _run(store)
    pointer = run.add_dashboard_component(name="report", component_type="html", from_path=_report(tmp_path / "r"))

    assert (pointer["entry"], pointer["files"], pointer["version"]) == ("index.html", 3, 1)
    assert run.reload().dashboard_components == [pointer]
    manifest = components.read_manifest(store.models, run.id, pointer)
    assert set(manifest.files) == {"index.html", "style.css", "img/dot.png"}
    assert manifest.files["img/dot.png"].media_type == "image/png" and manifest.sha256 == pointer["manifest"]
    assert components.read_file(store.models, run.id, pointer, "img/dot.png") == (PNG, "image/png")

    page, media_type = components.self_contained_entry(store.models, run.id, pointer)
    text = page.decode()
    png_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert media_type == "text/html" and f'<img src="{png_url}" alt="dot">' in text
    css = base64.b64decode(text.split('href="data:text/css;base64,', 1)[1].split('"', 1)[0]).decode()
    assert f'url("{png_url}")' in css and "rgb(200, 0, 0)" in css  # the sheet's own picture inlined too
    # What is not a file of the component stays as written: a URL, a path leading out.
    assert 'href="https://example.org/x"' in text and 'src="../outside.png"' in text
    with pytest.raises(NotFoundError, match=r"no file 'nope\.png'"):
        components.read_file(store.models, run.id, pointer, "nope.png")


def test_replacing_writes_a_new_version_and_leaves_the_old_one_whole(store: RunStore, tmp_path: Path) -> None:
    run = _run(store)
    first = run.add_dashboard_component(name="report", component_type="html", from_path=_report(tmp_path / "a"))
    with pytest.raises(ConflictError, match="replace=True"):
        run.add_dashboard_component(name="report", component_type="html", from_path=_report(tmp_path / "b", "New"))
    assert len([f for f in _stored_files(store, run.id) if f.startswith("manifests/")]) == 1

    second = run.add_dashboard_component(name="report", component_type="html", from_path=tmp_path / "b", replace=True)
    assert second["version"] == 2 and second["manifest"] != first["manifest"]
    assert run.reload().dashboard_components == [second]
    # The old version still reads whole, as a reader holding its pointer would read it.
    old_page = components.read_file(store.models, run.id, first)[0].decode()
    new_page = components.read_file(store.models, run.id, second)[0].decode()
    assert "<h1>Report</h1>" in old_page and "<h1>New</h1>" in new_page
    # The picture and the sheet did not change: stored once, shared by both versions.
    stored = _stored_files(store, run.id)
    assert (
        len([f for f in stored if f.startswith("blobs/")]) == 4 and len([f for f in stored if "manifests/" in f]) == 2
    )

    # Changing the source afterwards changes nothing stored; the same bytes again are the same version.
    (tmp_path / "b" / "index.html").write_text("changed")
    assert "<h1>New</h1>" in components.read_file(store.models, run.id, second)[0].decode()
    again = run.add_dashboard_component(
        name="report", component_type="html", from_path=_report(tmp_path / "c", "New"), replace=True
    )
    assert again["manifest"] == second["manifest"] and again["version"] == 3


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda d: (d / "page.html").write_text("x"), UsageError, "has no index.html"),
        (
            lambda d: ((d / "index.html").write_text("x"), (d / "l.png").symlink_to("/etc/passwd")),
            UsageError,
            "is a link",
        ),
        (
            lambda d: [(d / f"{i}.txt").write_text("x") for i in range(5)] + [(d / "index.html").write_text("x")],
            UsageError,
            "holds 6 files; at most 4",
        ),
    ],
    ids=["no-entry", "symlink", "too-many"],
)
def test_a_bad_folder_is_refused_and_nothing_is_written(
    store: RunStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Any, error: type, match: str
) -> None:
    monkeypatch.setattr(components, "MAX_FILES", 4)
    run = _run(store)
    folder = tmp_path / "bad"
    folder.mkdir()
    make(folder)
    with pytest.raises(error, match=match) as raised:
        run.add_dashboard_component(name="report", component_type="html", from_path=folder)
    assert str(folder) in str(raised.value)
    assert _stored_files(store, run.id) == set() and run.reload().dashboard_components == []


def test_bad_arguments_are_named(store: RunStore, tmp_path: Path) -> None:
    run = _run(store)
    page = tmp_path / "p.html"
    page.write_text("x")
    with pytest.raises(UsageError, match="component type 'pdf' is not one of png, html, json, svg"):
        run.add_dashboard_component(name="report", component_type="pdf", from_path=page)
    with pytest.raises(NotFoundError, match="no file or folder"):
        run.add_dashboard_component(name="report", component_type="html", from_path=tmp_path / "missing.html")
    with pytest.raises(UsageError, match=r"component name '\.\./x' is invalid"):
        run.add_dashboard_component(name="../x", component_type="html", from_path=page)
    assert _stored_files(store, run.id) == set()


def test_gc_removes_replaced_versions_once_old_and_keeps_what_a_record_points_to(
    store: RunStore, provider: Any, tmp_path: Path
) -> None:
    run = _run(store, status="succeeded")
    first = run.add_dashboard_component(name="report", component_type="html", from_path=_report(tmp_path / "a"))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "index.html").write_text("<h1>only text now</h1>")
    second = run.add_dashboard_component(name="report", component_type="html", from_path=tmp_path / "b", replace=True)
    data = provider.volume("data")
    before = _stored_files(store, run.id)

    assert collect_garbage(store, data, now=time.time()).paths == []  # young: a writer may still be at it
    later = time.time() + GC_GRACE_S + 60
    dry = collect_garbage(store, data, dry_run=True, now=later)
    assert _stored_files(store, run.id) == before
    removed = {p.split("/components/", 1)[1] for p in dry.paths if "/components/" in p}
    old_only = {f"blobs/{f.sha256}" for f in components.read_manifest(store.models, run.id, first).files.values()}
    assert removed == {f"manifests/{first['manifest']}.json"} | old_only

    # The key-value record is forgotten (a Modal Dict after a week idle): the history still points to the new one.
    history = json.loads(store.models.read_bytes(f"runs/{run.id}/record.json"))
    assert [c["manifest"] for c in history["dashboard_components"]] == [second["manifest"]]
    store.records.delete(run.id)
    collect_garbage(store, data, now=later)
    assert _stored_files(store, run.id) == before - removed
    assert components.read_file(store.models, run.id, second)[0] == b"<h1>only text now</h1>"


def test_a_pointer_of_the_single_file_layout_is_still_served(store: RunStore) -> None:
    run = _run(store)
    store.models.write_bytes(f"runs/{run.id}/components/scores.json", b'{"f1": 0.5}')
    legacy = {"name": "scores", "type": "json", "media_type": "application/json", "size": 11,
              "path": f"runs/{run.id}/components/scores.json", "added_at": 1.0}  # fmt: skip
    assert components.read_file(store.models, run.id, legacy) == (b'{"f1": 0.5}', "application/json")
    assert components.self_contained_entry(store.models, run.id, legacy)[0] == b'{"f1": 0.5}'
