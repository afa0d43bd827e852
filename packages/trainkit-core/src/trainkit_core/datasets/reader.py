"""Job side: read the synced version of a dataset from the mounted data volume.

Training (inside the provider's process or container) calls::

    from trainkit_core.datasets.reader import read_synced
    data = read_synced(ctx.path("data"), "demo")
    data.train, data.eval      # lists of {"messages": [{"role", "content"}, ...]}

`read_synced` reads ``current.json``, the version's manifest and its blobs, checks
every blob's sha256 against the manifest, and parses the files with the validator's
own rules; a dataset with errors raises `DatasetInvalidError` (the same problems,
files and lines a user saw from ``trainkit validate``). Prompt/completion pairs come
back as a user and an assistant turn; a system message stays first in the list for
the chat format to fold into the first user turn. An image part's relative path
becomes the absolute path of its blob on the volume (a ``data:`` URL stays as it is). The eval examples are the eval
files, or the seeded split the spec asks for (the same split validation checked).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit_core.datasets.images import with_image_paths
from trainkit_core.datasets.layout import Manifest, blob_path, current_path, manifest_path, parse_current
from trainkit_core.datasets.spec import check_name
from trainkit_core.datasets.validate import DatasetInvalidError, check
from trainkit_core.errors import NotFoundError, UsageError


@dataclass
class SyncedDataset:
    name: str
    version: str
    hash: str
    format: str
    train: list[dict[str, Any]] = field(default_factory=list)
    eval: list[dict[str, Any]] = field(default_factory=list)
    description: str = ""


def current_version(data_root: Path, name: str) -> dict[str, Any]:
    """``current.json`` of `name` under the mounted data volume; `NotFoundError` when never synced."""
    path = Path(data_root) / current_path(check_name(name))
    if not path.is_file():
        raise NotFoundError(f"dataset {name!r} was never synced to the data volume", hint=f"run `trainkit sync {name}`")
    return parse_current(path.read_bytes(), where=str(path))


def read_synced(data_root: Path, name: str) -> SyncedDataset:
    """The current version of `name`, normalised and split (see the module docstring)."""
    data_root = Path(data_root)
    version = current_version(data_root, name)["version"]
    where = data_root / manifest_path(name, version)
    if not where.is_file():
        raise NotFoundError(f"dataset {name!r}: manifest of version {version} is missing at {where}")
    manifest = Manifest.from_json(where.read_bytes(), where=str(where))

    def read(rel: str) -> bytes | None:
        info = manifest.files.get(rel)
        if info is None:
            return None
        blob = data_root / blob_path(name, info.sha256)
        if not blob.is_file():
            return None
        data = blob.read_bytes()
        if hashlib.sha256(data).hexdigest() != info.sha256:
            raise UsageError(f"dataset {name!r} version {version}: {rel} does not match its hash (blob {blob})")
        return data

    def blob_of(rel: str) -> str:
        return str(data_root / blob_path(name, manifest.files[rel].sha256))

    def size(rel: str) -> int | None:  # an image over the byte limit is refused unread
        info = manifest.files.get(rel)
        return info.size if info is not None else None

    checked = check(name, read, source="volume", folder_name=name, size=size)
    checked.report.version, checked.report.hash = version, manifest.hash
    if not checked.report.ok() or checked.spec is None:
        raise DatasetInvalidError(checked.report)
    return SyncedDataset(
        name=name,
        version=version,
        hash=manifest.hash,
        format=checked.spec.format,
        train=[with_image_paths(ex.as_record(), blob_of) for ex in checked.train],
        eval=[with_image_paths(ex.as_record(), blob_of) for ex in checked.eval],
        description=checked.spec.description,
    )
