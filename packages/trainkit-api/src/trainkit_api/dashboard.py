"""The dashboard: one HTML page and its static files, served at `/` and `/static/`.

The page is plain HTML, CSS and JavaScript shipped inside the package (no CDN, no
build step): the machines it runs on often have no internet. It holds no data of its
own and needs no token to load; everything it shows comes from the `/v1` routes,
which it calls with the bearer token the user types once (kept in the browser's
`sessionStorage`, never put in a URL). So these routes stay outside the API's auth.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

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


def build_router() -> APIRouter:
    """The dashboard's routes; `create_app` includes them next to `/v1`."""
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    def index() -> FileResponse:
        return _serve(static_file("index.html"))

    @router.get("/static/{name:path}")
    def static(name: str) -> FileResponse:
        return _serve(static_file(name))

    return router
