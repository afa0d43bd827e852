"""Sync: upload a local dataset to the data volume only when its content changed.

API for callers (the CLI's ``trainkit sync``, ``trainkit train``, the web API)::

    from trainkit_core.datasets.sync import sync_dataset
    result = sync_dataset(provider, "demo")            # a name in TRAINKIT_DATASETS_DIR, or a folder
    result.unchanged, result.version, result.uploaded_bytes, result.files_sent

Steps, each of which keeps the previous version current and readable if it fails or
is killed:

1. hash every file (the manifest); when the volume's current version has the same
   dataset hash, send nothing and return ``unchanged=True`` (those bytes were
   validated when they were synced, so they are not parsed again);
2. validate the local copy; on errors (or warnings when `strict`) raise
   `DatasetInvalidError` before anything is written to the volume;
3. upload only the files whose content the volume does not hold as a verified blob
   yet: a blob is reused only when a kept version lists it or its ``verified/``
   marker says it was checked against its hash after it was written (a sync killed
   midway left verified blobs behind, which are reused; a file that changed during
   its upload leaves no marker, its blob is removed, and the next sync sends it again);
4. write the version's ``manifest.json``, then ``current.json``: the switch;
5. remove abandoned versions (a ``pending.json`` without the switch), versions older
   than the newest `keep_versions`, and blobs no kept version uses.

Syncs of one dataset are serialised by a lock in the provider's key-value store
(namespace ``datasets``); a lock left by a killed process on this machine is taken
over, one left elsewhere expires after `LOCK_STALE_S`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.datasets.images import ImageLimits
from trainkit_core.datasets.layout import (
    Manifest,
    blob_path,
    blobs_dir,
    current_path,
    manifest_path,
    pending_path,
    verified_dir,
    verified_path,
    versions_dir,
)
from trainkit_core.datasets.local import DatasetFileError, build_manifest, find_local, hash_file, open_local
from trainkit_core.datasets.problems import Report
from trainkit_core.datasets.validate import DatasetInvalidError, LengthCheck, check_local
from trainkit_core.errors import ConflictError, NotFoundError, ProviderError, UsageError
from trainkit_core.plugins.hookspecs import KVStore, Volume
from trainkit_core.toolkit.kv_lock import kv_lock

if TYPE_CHECKING:
    from trainkit_core.plugins.provider import Provider
    from trainkit_core.settings import Settings

logger = logging.getLogger(__name__)

#: How many complete versions a sync keeps (the new one included).
KEEP_VERSIONS = 3
#: A lock older than this, held by a process on another machine, is taken over.
LOCK_STALE_S = 6 * 3600
LOCK_NAMESPACE = "datasets"

#: ``progress(sent_bytes, total_bytes)``, called before the first and after every file.
Progress = Callable[[int, int], None]


@dataclass
class SyncResult:
    name: str
    version: str
    hash: str
    unchanged: bool
    uploaded_bytes: int = 0
    files_sent: list[str] = field(default_factory=list)
    files_reused: list[str] = field(default_factory=list)
    removed_versions: list[str] = field(default_factory=list)
    report: Report | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "hash": self.hash,
            "unchanged": self.unchanged,
            "uploaded_bytes": self.uploaded_bytes,
            "files_sent": list(self.files_sent),
            "files_reused": list(self.files_reused),
            "removed_versions": list(self.removed_versions),
            "warnings": [p.as_dict() for p in self.report.warnings] if self.report else [],
        }


def sync_dataset(
    provider: Provider,
    dataset: str | Path,
    settings: Settings | None = None,
    *,
    length: LengthCheck | None = None,
    strict: bool = False,
    progress: Progress | None = None,
) -> SyncResult:
    """Sync local dataset `dataset` (a name under the datasets dir, or a folder) to `provider`'s data volume."""
    settings = settings or provider.settings
    local = find_local(Path(settings.datasets.datasets_dir), str(dataset))
    return sync_to_volume(
        provider.volume("data"),
        local.path,
        lock_kv=provider.kv(LOCK_NAMESPACE),
        length=length,
        strict=strict,
        progress=progress,
        image_limits=ImageLimits.from_settings(settings.datasets),
    )


def synced_hash(volume: Volume, name: str) -> str | None:
    """The dataset hash of the volume's current version of `name`, None when never synced."""
    try:
        return str(json.loads(volume.read_bytes(current_path(name)))["hash"])
    except NotFoundError:
        return None


def sync_to_volume(
    volume: Volume,
    folder: Path,
    *,
    lock_kv: KVStore | None = None,
    length: LengthCheck | None = None,
    strict: bool = False,
    progress: Progress | None = None,
    keep_versions: int = KEEP_VERSIONS,
    image_limits: ImageLimits | None = None,
) -> SyncResult:
    """Sync the dataset in `folder` to `volume` (the steps in the module docstring)."""
    folder = Path(folder)
    dataset = open_local(folder)
    manifest = None
    if dataset.spec is not None:
        try:
            manifest = build_manifest(folder, dataset.spec)
        except DatasetFileError:
            manifest = None  # validation names the missing file
    if manifest is None:
        raise DatasetInvalidError(check_local(folder, length=length, image_limits=image_limits).report)
    name = manifest.name
    unchanged = _unchanged(volume, name, manifest.hash)
    if unchanged:  # read-only: an unchanged dataset takes no lock, so parallel submissions never collide
        return unchanged
    with _sync_lock(lock_kv, name):
        unchanged = _unchanged(volume, name, manifest.hash)
        if unchanged:
            return unchanged
        report = check_local(folder, length=length or LengthCheck.estimate(), image_limits=image_limits).report
        if not report.ok(strict=strict):
            raise DatasetInvalidError(report, strict=strict)
        version = _new_version(manifest.hash)
        present = _blob_sizes(volume, name)
        trusted = _verified_blobs(volume, name)
        to_send: dict[str, str] = {}  # sha256 -> one local file with that content
        reused: list[str] = []
        for rel, info in manifest.files.items():
            if (present.get(info.sha256) == info.size and info.sha256 in trusted) or info.sha256 in to_send:
                reused.append(rel)
            else:
                to_send[info.sha256] = rel
        total = sum(manifest.files[rel].size for rel in to_send.values())
        volume.write_bytes(
            pending_path(name, version),
            json.dumps({"started_at": time.time(), "host": socket.gethostname(), "pid": os.getpid()}).encode(),
        )
        sent = 0
        if progress:
            progress(0, total)
        for sha, rel in to_send.items():
            _upload_blob(volume, name, folder / rel, sha)
            sent += manifest.files[rel].size
            if progress:
                progress(sent, total)
        stored = _blob_sizes(volume, name)
        missing = [rel for rel, info in manifest.files.items() if stored.get(info.sha256) != info.size]
        if missing:
            raise ProviderError(
                f"volume {volume.name!r} lacks {', '.join(missing)} after the upload; the previous version stays current"
            )
        manifest.version, manifest.created_at = version, time.time()
        volume.write_bytes(manifest_path(name, version), manifest.to_json())
        volume.write_bytes(
            current_path(name),
            json.dumps({"name": name, "version": version, "hash": manifest.hash, "updated_at": time.time()}).encode(),
        )
        volume.remove(pending_path(name, version))
        logger.info("dataset %s synced as version %s: %d file(s), %d bytes sent", name, version, len(to_send), sent)
        removed = _clean_up(volume, name, version, keep_versions)
        return SyncResult(
            name,
            version,
            manifest.hash,
            False,
            uploaded_bytes=sent,
            files_sent=sorted(to_send.values()),
            files_reused=sorted(reused),
            removed_versions=removed,
            report=report,
        )


def _unchanged(volume: Volume, name: str, digest: str) -> SyncResult | None:
    """The result of a sync with nothing to do, when the volume's current version has hash `digest`."""
    current = _read_current(volume, name)
    if current and current.get("hash") == digest and volume.exists(manifest_path(name, current["version"])):
        # The same bytes passed validation when they were synced: nothing to check or send.
        logger.info("dataset %s unchanged (version %s); nothing sent", name, current["version"])
        return SyncResult(name, current["version"], digest, True)
    return None


def _upload_blob(volume: Volume, name: str, local: Path, sha: str) -> None:
    """Send `local` as the blob `sha`, and mark it verified only when it provably holds that content.

    The Volume protocol has no rename, so the blob is written under its final name;
    the local file is hashed again after the upload and its identity (size, mtime,
    inode) compared with before. When anything moved, the blob is removed, so no later
    sync reuses content that does not match its name.
    """
    before = _identity(local)
    volume.put_file(local, blob_path(name, sha))
    if before != _identity(local) or hash_file(local, lines=False).sha256 != sha:
        try:
            volume.remove(blob_path(name, sha))
        except NotFoundError:
            pass
        raise ConflictError(f"{local} changed while it was being synced; run the sync again")
    volume.write_bytes(verified_path(name, sha), json.dumps({"verified_at": time.time()}).encode())


def _identity(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _verified_blobs(volume: Volume, name: str) -> set[str]:
    """Blobs known to hold their hash's content: listed by a complete version, or marked when written."""
    trusted: set[str] = set()
    try:
        trusted.update(e.path.rsplit("/", 1)[-1] for e in volume.listdir(verified_dir(name)) if not e.is_dir)
    except NotFoundError:
        pass
    try:
        versions = [e for e in volume.listdir(versions_dir(name)) if e.is_dir]
    except NotFoundError:
        return trusted
    for entry in versions:
        version = entry.path.rsplit("/", 1)[-1]
        where = manifest_path(name, version)
        if volume.exists(where) and not volume.exists(pending_path(name, version)):
            try:
                manifest = Manifest.from_json(volume.read_bytes(where), where=where)
            except UsageError:
                continue
            trusted.update(info.sha256 for info in manifest.files.values())
    return trusted


def _read_current(volume: Volume, name: str) -> dict[str, Any] | None:
    try:
        return json.loads(volume.read_bytes(current_path(name)))  # type: ignore[no-any-return]
    except NotFoundError:
        return None
    except ValueError:
        logger.warning("unreadable %s on volume %s; syncing a new version", current_path(name), volume.name)
        return None


def _new_version(digest: str) -> str:
    """Sortable by time: ``YYYYMMDD-HHMMSS-micro-<hash prefix>``."""
    now = time.time()
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"-{int(now % 1 * 1e6):06d}-{digest[:8]}"


def _blob_sizes(volume: Volume, name: str) -> dict[str, int]:
    try:
        return {
            entry.path.rsplit("/", 1)[-1]: entry.size for entry in volume.listdir(blobs_dir(name)) if not entry.is_dir
        }
    except NotFoundError:
        return {}


def _clean_up(volume: Volume, name: str, current: str, keep: int) -> list[str]:
    """Remove abandoned and old versions and the blobs only they used; return the removed versions."""
    try:
        entries = [e for e in volume.listdir(versions_dir(name)) if e.is_dir]
    except NotFoundError:
        return []
    complete: list[str] = []
    removed: list[str] = []
    for entry in entries:
        version = entry.path.rsplit("/", 1)[-1]
        if version == current:
            continue
        if volume.exists(pending_path(name, version)) or not volume.exists(manifest_path(name, version)):
            removed.append(version)  # a sync that never switched to it
        else:
            complete.append(version)
    kept = [current, *sorted(complete, reverse=True)[: max(keep - 1, 0)]]
    removed += [v for v in complete if v not in kept]
    for version in removed:
        volume.remove(f"{versions_dir(name)}/{version}", recursive=True)
    used: set[str] = set()
    for version in kept:
        where = manifest_path(name, version)
        used.update(info.sha256 for info in Manifest.from_json(volume.read_bytes(where), where=where).files.values())
    for sha in _blob_sizes(volume, name):
        if sha not in used and not sha.startswith(".tmp-"):
            volume.remove(blob_path(name, sha))
    remove_stale_markers(volume, name)
    if removed:
        logger.info("dataset %s: removed versions %s", name, ", ".join(sorted(removed)))
    return sorted(removed)


def remove_stale_markers(volume: Volume, name: str) -> None:
    """Drop ``verified/`` markers whose blob is gone (a later upload of that hash is checked again)."""
    try:
        markers = [e.path.rsplit("/", 1)[-1] for e in volume.listdir(verified_dir(name)) if not e.is_dir]
    except NotFoundError:
        return
    blobs = _blob_sizes(volume, name)
    for sha in markers:
        if sha not in blobs:
            volume.remove(verified_path(name, sha))


def _sync_lock(kv: KVStore | None, name: str) -> AbstractContextManager[None]:
    """One sync of `name` at a time; a dead holder's lock is taken over."""
    return kv_lock(
        kv,
        f"sync-lock/{name}",
        busy=f"another sync of dataset {name!r} is running",
        wait_s=0,
        stale_s=LOCK_STALE_S,
        hint="wait for it to finish",
    )
