"""Files a run attaches for the dashboard: content-addressed files under immutable manifests.

A component is one file or a folder (an HTML report with its pictures and style
sheet). Each file is stored once under its SHA-256, and a manifest naming the files of
one version is stored under its own hash, so nothing once written changes:
`replace=True` writes a new manifest and moves the run record's pointer to it, while a
reader holding the old pointer still reads a whole, consistent version. `trainkit gc`
removes the manifests and files no record points to (`unused_component_files`).

Everything lives beside the run's history on the models volume
(``runs/<id>/components/``), so deleting a run deletes its components. Records written
before manifests existed point at a single file (``path``); they are still served.
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import posixpath
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.plugins.hookspecs import Volume
from trainkit_core.runs.paths import components_dir

#: The kinds of component the dashboard shows, and the media type of each one's entry.
DASHBOARD_TYPES = {"png": "image/png", "html": "text/html", "json": "application/json", "svg": "image/svg+xml"}
#: A folder's entry file is `index.<type>`; a single file is its own entry.
ENTRY_STEM = "index"
#: Limits of one component: it is read back whole by every page view.
MAX_FILES = 256
MAX_BYTES = 64 * 1024 * 1024

_SHA = re.compile(r"[0-9a-f]{64}")


def blob_path(run_id: str, sha256: str) -> str:
    return f"{components_dir(run_id)}/blobs/{sha256}"


def manifest_path(run_id: str, sha256: str) -> str:
    return f"{components_dir(run_id)}/manifests/{sha256}.json"


@dataclass(frozen=True)
class ComponentFile:
    sha256: str
    size: int
    media_type: str


@dataclass(frozen=True)
class ComponentManifest:
    """One version of a component: its files by relative path, and which one is shown."""

    name: str
    type: str
    entry: str
    files: Mapping[str, ComponentFile]

    def to_json(self) -> bytes:
        files = {path: vars(f) for path, f in sorted(self.files.items())}
        body = {"name": self.name, "type": self.type, "entry": self.entry, "files": files}
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_json()).hexdigest()

    @classmethod
    def from_json(cls, data: bytes) -> ComponentManifest:
        body = json.loads(data)
        files = {path: ComponentFile(**f) for path, f in body["files"].items()}
        return cls(name=body["name"], type=body["type"], entry=body["entry"], files=files)


def source_files(source: Path, component_type: str) -> tuple[str, dict[str, Path]]:
    """The entry and the files (by relative path) of a component read from `source`.

    A folder must hold `index.<type>`; links and special files are refused, since what
    they point at is not the user's to upload. Limits are checked before anything is
    written, so a refused component leaves nothing behind.
    """
    if component_type not in DASHBOARD_TYPES:
        raise UsageError(f"component type {component_type!r} is not one of {', '.join(DASHBOARD_TYPES)}")
    if source.is_symlink() or not (source.is_file() or source.is_dir()):
        raise NotFoundError(f"no file or folder {str(source)!r}")
    if source.is_file():
        return source.name, {source.name: source}
    files: dict[str, Path] = {}
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise UsageError(f"{str(path)!r} in component folder {str(source)!r} is a link or a special file")
        if path.is_file():
            files[relative] = path
    entry = f"{ENTRY_STEM}.{component_type}"
    if entry not in files:
        raise UsageError(f"component folder {str(source)!r} has no {entry}: a folder's entry file is {entry}")
    if len(files) > MAX_FILES:
        raise UsageError(f"component folder {str(source)!r} holds {len(files)} files; at most {MAX_FILES}")
    total = sum(p.stat().st_size for p in files.values())
    if total > MAX_BYTES:
        raise UsageError(f"component {str(source)!r} is {total} bytes; at most {MAX_BYTES}")
    return entry, files


def store_component(volume: Volume, run_id: str, *, name: str, component_type: str, source: Path) -> dict[str, Any]:
    """Upload the files and the manifest of a new version; the record's pointer to it.

    Files already stored (the same bytes in an earlier version) are not sent again. The
    pointer is not attached to any record here: the caller does that under the record's
    lock, last, so a reader never sees a manifest whose files are still on their way.
    """
    entry, paths = source_files(source, component_type)
    files: dict[str, ComponentFile] = {}
    for relative, path in paths.items():
        sha = _sha256_of(path)
        if not volume.exists(blob_path(run_id, sha)):
            volume.put_file(path, blob_path(run_id, sha))
        media_type = DASHBOARD_TYPES[component_type] if relative == entry else _media_type(relative)
        files[relative] = ComponentFile(sha256=sha, size=path.stat().st_size, media_type=media_type)
    manifest = ComponentManifest(name=name, type=component_type, entry=entry, files=files)
    where = manifest_path(run_id, manifest.sha256)
    if not volume.exists(where):
        volume.write_bytes(where, manifest.to_json())
    return {
        "name": name,
        "type": component_type,
        "media_type": DASHBOARD_TYPES[component_type],
        "entry": entry,
        "manifest": manifest.sha256,
        "files": len(files),
        "size": sum(f.size for f in files.values()),
        "added_at": time.time(),
    }


def read_manifest(volume: Volume, run_id: str, pointer: Mapping[str, Any]) -> ComponentManifest:
    """The manifest a record's pointer names; a pointer of the single-file layout becomes one too."""
    sha = pointer.get("manifest")
    if sha is None:  # written before manifests: one file at `path`
        name = str(pointer["path"]).rsplit("/", 1)[-1]
        legacy = ComponentFile(sha256="", size=int(pointer.get("size") or 0), media_type=str(pointer["media_type"]))
        return ComponentManifest(name=str(pointer["name"]), type=str(pointer["type"]), entry=name, files={name: legacy})
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        raise NotFoundError(f"component {pointer.get('name')!r} of run {run_id} names no valid manifest")
    return ComponentManifest.from_json(volume.read_bytes(manifest_path(run_id, sha)))


def read_file(volume: Volume, run_id: str, pointer: Mapping[str, Any], path: str | None = None) -> tuple[bytes, str]:
    """A file of the version `pointer` names (its entry when `path` is None), with its media type."""
    return _read(volume, run_id, pointer, read_manifest(volume, run_id, pointer), path)


def _read(
    volume: Volume, run_id: str, pointer: Mapping[str, Any], manifest: ComponentManifest, path: str | None
) -> tuple[bytes, str]:
    path = manifest.entry if path is None else path
    found = manifest.files.get(path)
    if found is None:
        raise NotFoundError(f"component {manifest.name!r} of run {run_id} has no file {path!r}")
    where = str(pointer["path"]) if not found.sha256 else blob_path(run_id, found.sha256)
    return volume.read_bytes(where), found.media_type


def self_contained_entry(volume: Volume, run_id: str, pointer: Mapping[str, Any]) -> tuple[bytes, str]:
    """The entry, an HTML one with the component's files it names inlined as `data:` URLs.

    The dashboard shows an HTML component in a sandboxed frame of its own origin, and
    the files sit behind the API's token, so the frame could not fetch them: the page it
    gets must need nothing else. `src` and `href` attributes naming a file of the
    component (relative to the entry) are inlined, and `url(...)` in inlined style sheets.
    """
    manifest = read_manifest(volume, run_id, pointer)  # read once: every inlined file is named in it
    data, media_type = _read(volume, run_id, pointer, manifest, None)
    if manifest.type != "html" or len(manifest.files) == 1:
        return data, media_type

    def inline(relative_to: str, reference: str, *, in_css: bool = False) -> str | None:
        target = _resolve(relative_to, reference)
        if target is None or target not in manifest.files or target == manifest.entry:
            return None
        kind = manifest.files[target].media_type
        if in_css and kind == "text/css":
            return None  # a style sheet's @import stays as it is: no loops, one level of inlining
        content, _ = _read(volume, run_id, pointer, manifest, target)
        if kind == "text/css":
            content = _inline_css_urls(content.decode("utf-8", "replace"), target, inline).encode()
        return f"data:{kind};base64,{base64.b64encode(content).decode()}"

    page = data.decode("utf-8", "replace")
    page = _ATTRIBUTE.sub(lambda m: _replace_attribute(m, manifest.entry, inline), page)
    page = _STYLE_BLOCK.sub(
        lambda m: m.group(1) + _inline_css_urls(m.group(2), manifest.entry, inline) + m.group(3), page
    )
    return page.encode(), media_type


def unused_component_files(
    volume: Volume, run_id: str, records: Iterable[Mapping[str, Any]], *, older_than: float
) -> list[str]:
    """The manifests and files of run `run_id` that none of `records` points to, last changed before `older_than`.

    `records` are every copy of the run's record that may be read later (the key-value
    one and the history on the volume): what either points to stays.
    """
    base = components_dir(run_id)
    if not volume.exists(f"{base}/manifests"):
        return []
    pointed = {
        str(c.get("manifest"))
        for record in records
        for c in record.get("dashboard_components") or []
        if c.get("manifest")
    }
    unused: list[str] = []
    kept_blobs: set[str] = set()
    for entry in volume.listdir(f"{base}/manifests"):
        sha = entry.path.rsplit("/", 1)[-1].removesuffix(".json")
        if sha in pointed or entry.mtime >= older_than:
            kept_blobs.update(
                f.sha256 for f in ComponentManifest.from_json(volume.read_bytes(entry.path)).files.values()
            )
        else:
            unused.append(entry.path)
    if volume.exists(f"{base}/blobs"):
        for blob in volume.listdir(f"{base}/blobs"):
            if blob.path.rsplit("/", 1)[-1] not in kept_blobs and blob.mtime < older_than:
                unused.append(blob.path)
    return unused


# ---------------------------------------------------------------------------- helpers


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _media_type(path: str) -> str:
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


#: `src="…"`, `href='…'` inside a start tag (the value quoted, as HTML writers do).
_ATTRIBUTE = re.compile(r"""(<[a-zA-Z][^>]*?\s(?:src|href)\s*=\s*)(["'])([^"']*)\2""")
_STYLE_BLOCK = re.compile(r"(<style[^>]*>)(.*?)(</style\s*>)", re.DOTALL | re.IGNORECASE)
_CSS_URL = re.compile(r"""url\(\s*(["']?)([^"')]+)\1\s*\)""")


def _resolve(relative_to: str, reference: str) -> str | None:
    """The component path a relative reference names, or None for anything else (a URL, an anchor, `..` out)."""
    reference = reference.split("#", 1)[0].split("?", 1)[0].strip()
    if not reference or reference.startswith("/") or re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", reference):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(relative_to), reference))
    return None if joined.startswith("../") or joined == ".." else joined


def _replace_attribute(match: re.Match[str], entry: str, inline: Any) -> str:
    url = inline(entry, match.group(3))
    return match.group(0) if url is None else f"{match.group(1)}{match.group(2)}{url}{match.group(2)}"


def _inline_css_urls(css: str, relative_to: str, inline: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        url = inline(relative_to, match.group(2), in_css=True)
        return match.group(0) if url is None else f'url("{url}")'

    return _CSS_URL.sub(replace, css)
