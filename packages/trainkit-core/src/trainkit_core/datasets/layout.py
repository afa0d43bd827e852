"""Where a synced dataset lives on the data volume, and its manifest.

::

    datasets/<name>/current.json                   {"version", "hash", ...}: the version readers use
    datasets/<name>/versions/<version>/manifest.json   file -> sha256, size, examples; dataset hash
    datasets/<name>/versions/<version>/pending.json    only while a sync of that version runs
    datasets/<name>/blobs/<sha256>                 file contents, stored once by content
    datasets/<name>/verified/<sha256>              the blob was checked against its hash when written

A version is a manifest over content-addressed blobs, so a new version re-sends only
the files whose content the volume does not hold yet, with nothing but the `Volume`
protocol (which, like a Modal volume, has no rename or copy). ``current.json`` is
written last: until then readers keep the previous version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from trainkit_core.errors import UsageError

ROOT = "datasets"
MANIFEST_SCHEMA = 1


def current_path(name: str) -> str:
    return f"{ROOT}/{name}/current.json"


def versions_dir(name: str) -> str:
    return f"{ROOT}/{name}/versions"


def manifest_path(name: str, version: str) -> str:
    return f"{ROOT}/{name}/versions/{version}/manifest.json"


def pending_path(name: str, version: str) -> str:
    return f"{ROOT}/{name}/versions/{version}/pending.json"


def blobs_dir(name: str) -> str:
    return f"{ROOT}/{name}/blobs"


def blob_path(name: str, sha256: str) -> str:
    return f"{ROOT}/{name}/blobs/{sha256}"


def verified_dir(name: str) -> str:
    return f"{ROOT}/{name}/verified"


def verified_path(name: str, sha256: str) -> str:
    """A blob whose marker exists holds exactly its hash's content (a killed upload leaves none)."""
    return f"{ROOT}/{name}/verified/{sha256}"


@dataclass(frozen=True)
class FileInfo:
    sha256: str
    size: int
    examples: int = 0


@dataclass
class Manifest:
    """Content of one dataset version: every file (``dataset.toml`` included) by hash."""

    name: str
    hash: str
    format: str
    files: dict[str, FileInfo]
    version: str = ""
    created_at: float = 0.0
    schema: int = MANIFEST_SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(info.size for info in self.files.values())

    def to_json(self) -> bytes:
        data = asdict(self)
        return json.dumps(data, indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> Manifest:
        try:
            raw = json.loads(data)
            files = {path: FileInfo(**info) for path, info in raw.pop("files").items()}
            return cls(files=files, **raw)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise UsageError(f"corrupt dataset manifest {where}: {exc}") from None


def dataset_hash(files: dict[str, str]) -> str:
    """One hash over every file's path and content hash: equal hashes, equal datasets."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(f"{path}\0{files[path]}\n".encode())
    return digest.hexdigest()


def parse_current(data: bytes, *, where: str) -> dict[str, Any]:
    """``current.json``: at least ``version`` and ``hash``; `UsageError` when it is not that."""
    try:
        current = json.loads(data)
        if not isinstance(current, dict) or not isinstance(current.get("version"), str) or "hash" not in current:
            raise ValueError("no version or hash")
    except ValueError as exc:
        raise UsageError(f"corrupt {where}: {exc}; run `trainkit sync` again to write a new version") from None
    return current
