"""The dashboard: one HTML page and its static files, served at `/` and `/static/`.

The page is plain HTML, CSS and JavaScript shipped inside the package (no CDN, no
build step): the machines it runs on often have no internet. It holds no data of its
own and needs no token to load; everything it shows comes from the `/v1` routes,
which it calls with the bearer token the user types once, and only when the server
answers 401 (an open API on loopback needs none; kept in the browser's
`sessionStorage`, never put in a URL). So these routes stay outside the API's auth.

Data routes live here too, behind the token like every `/v1` route: the components a
run attached with `TrainingRun.add_dashboard_component` (PNG, SVG, HTML, JSON; a file or
a folder), which only the dashboard shows. They are user content, so they go out with a
sandboxing Content-Security-Policy and the page renders HTML ones in a sandboxed frame;
an HTML entry comes with the component's files it names inlined, since that frame
cannot send the token to fetch them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, Response

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.routes.runs import RunId
from trainkit_api.run_paths import run_route
from trainkit_api.state import ApiState, get_state
from trainkit_core.errors import NotFoundError
from trainkit_core.ids import NAME_PATTERN
from trainkit_core.runs import components

STATIC_DIR = Path(__file__).resolve().parent / "static"

#: The only files served, by suffix; anything else under static/ stays private.
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
}

#: The page changes with the package version, not per request; a short cache is enough.
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


def static_file(name: str) -> Path:
    """The file `name` under static/, refusing anything that would leave that directory."""
    if not name or "\x00" in name or "\\" in name:
        raise HTTPException(status_code=404, detail="no such file")
    path = (STATIC_DIR / name).resolve()
    if STATIC_DIR not in path.parents or path.suffix not in MEDIA_TYPES or not path.is_file():
        raise HTTPException(status_code=404, detail="no such file")
    return path


def _serve(path: Path) -> FileResponse:
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=_HEADERS)


#: Attached files are the run's own content: no script, no plugin, no navigation of the page.
COMPONENT_HEADERS = {
    "Content-Security-Policy": (
        "sandbox; default-src 'none'; img-src data: blob:; style-src 'unsafe-inline' data:; font-src data:"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

ComponentName = Annotated[str, PathParam(pattern=NAME_PATTERN.pattern, description="The component's name.")]

components_router = APIRouter(
    prefix="/v1", tags=["runs"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES
)


def _pointer(state: ApiState, run_id: str, name: str) -> dict[str, Any]:
    """The record's pointer to the component's current version."""
    run = state.run(run_id, reconcile=False)
    found = [c for c in run.dashboard_components if c.get("name") == name]
    if not found:
        raise NotFoundError(f"run {run_id} has no dashboard component {name!r}")
    return found[-1]


@run_route(components_router, "GET", "/{run_id}/components/{name}", response_class=Response)
def get_component(run_id: RunId, name: ComponentName, state: ApiState = Depends(get_state)) -> Response:
    """A component the run attached (`TrainingRun.add_dashboard_component`): its entry file, self-contained."""
    data, media_type = components.self_contained_entry(state.store.models, run_id, _pointer(state, run_id, name))
    return Response(data, media_type=media_type, headers=COMPONENT_HEADERS)


@run_route(components_router, "GET", "/{run_id}/components/{name}/manifest")
def get_component_manifest(run_id: RunId, name: ComponentName, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    """The component's current version: its manifest's hash, its entry, and each file's hash, size and type."""
    pointer = _pointer(state, run_id, name)
    manifest = components.read_manifest(state.store.models, run_id, pointer)
    return {
        "name": manifest.name,
        "type": manifest.type,
        "version": pointer.get("version", 1),
        "manifest": pointer.get("manifest"),
        "entry": manifest.entry,
        "files": {path: vars(f) for path, f in manifest.files.items()},
    }


@run_route(components_router, "GET", "/{run_id}/components/{name}/files/{path:path}", response_class=Response)
def get_component_file(run_id: RunId, name: ComponentName, path: str, state: ApiState = Depends(get_state)) -> Response:
    """One file of the component's current version, by its path in the manifest."""
    data, media_type = components.read_file(state.store.models, run_id, _pointer(state, run_id, name), path)
    return Response(data, media_type=media_type, headers=COMPONENT_HEADERS)


router = APIRouter()


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    return _serve(static_file("index.html"))


@router.get("/static/{name:path}", include_in_schema=False)
def static(name: str) -> FileResponse:
    return _serve(static_file(name))


router.include_router(components_router)


def build_router() -> APIRouter:
    """The dashboard's routes; `create_app` includes them next to `/v1`."""
    return router
