"""Deleting what runs leave behind: a run, a trained model, unused dataset versions.

Everything goes through the provider's hooks (`Volume`, `KVStore`), so it works the
same on every provider. Each operation can be asked for a dry run, and reports the
bytes of files it frees (what it removes from volumes; key-value entries are counted,
not sized).

A delete is never left half done: the run is first marked in the ``deleting``
namespace, then its files and keys are removed, the record last and the mark after
it. A delete that is interrupted leaves the mark, and the next `delete_run` of that
id finishes the job (with the options of the first), even though some of its parts
are gone already. A run that is still running is refused with the reason: stop it
first. No heavy imports here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from trainkit_core.errors import ConflictError, NotFoundError
from trainkit_core.export.merged import EXPORT_PATH_PATTERN, EXPORT_STAGING_PREFIXES, EXPORTS_DIR
from trainkit_core.ids import check_run_id
from trainkit_core.plugins.hookspecs import Volume
from trainkit_core.runs.training_run import UNFINISHED, RunStore, history_dir, trained_dir

log = logging.getLogger(__name__)

DELETING_NAMESPACE = "deleting"


@dataclass
class Removal:
    """What an operation removes (or, in a dry run, would remove)."""

    paths: list[str] = field(default_factory=list)
    bytes: int = 0
    kv_keys: int = 0
    dry_run: bool = False
    resumed: bool = False
    #: What was left alone, and why (gc: a link or a file where trainkit keeps folders).
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def tree_size(volume: Volume, path: str) -> int:
    """Bytes of the files at `path` (a file or a folder); 0 when nothing is there."""
    if not volume.exists(path):
        return 0
    parent = path.rpartition("/")[0]
    for entry in volume.listdir(parent):
        if entry.path == path and not entry.is_dir:
            return entry.size
    return sum(e.size for e in volume.listdir(path, recursive=True) if not e.is_dir)


def _remove(volume: Volume, path: str) -> None:
    try:
        volume.remove(path, recursive=True)
    except NotFoundError:
        pass  # removed by an earlier, interrupted delete


def _run_paths(volume: Volume, run_id: str, keep_model: bool) -> list[str]:
    """The run's folders on the models volume, in the order they are removed (history last)."""
    paths = []
    if not keep_model:
        paths.append(trained_dir(run_id))
        if volume.exists(EXPORTS_DIR):
            for entry in volume.listdir(EXPORTS_DIR):
                name = entry.path.rsplit("/", 1)[-1]
                if name == run_id or name.startswith(f"{run_id}-step"):
                    paths.append(entry.path)
    paths.append(history_dir(run_id))
    return [p for p in paths if volume.exists(p)]


def _run_keys(store: RunStore, run_id: str) -> int:
    events = len(store.events(run_id).kv.keys(f"{run_id}/"))
    stop = 1 if store.stop_flag(run_id).is_set() else 0
    record = 1 if store.records.get(run_id) is not None else 0
    return events + stop + record


def delete_run(store: RunStore, run_id: str, *, keep_model: bool = False, dry_run: bool = False) -> Removal:
    """Delete run `run_id`: its record, events, stop flag, history, and (unless `keep_model`)
    its trained model with its checkpoints and exports.

    `ConflictError` for a run still pending or running (after asking its job, as
    `trainkit runs show` does); `NotFoundError` when there is no such run and no
    unfinished delete of it.
    """
    check_run_id(run_id)
    marks = store.kv(DELETING_NAMESPACE)
    mark = marks.get(run_id)
    if mark is None:
        run = store.get(run_id)
        if not run.ended():
            from trainkit_core.runs.reconcile import reconcile_run

            run.reload()
            reconcile_run(run)
        if run.status in UNFINISHED or run.status == "preempted":
            raise ConflictError(
                f"run {run_id} is {run.status} (phase {run.phase}); a running run is not deleted",
                hint=f"stop it first: trainkit runs stop {run_id} --wait",
            )
        if not keep_model:
            _refuse_while_trained_from(store, run_id)
    else:
        keep_model = bool(mark.get("keep_model"))
    volume = store.models
    paths = _run_paths(volume, run_id, keep_model)
    removal = Removal(
        paths=paths,
        bytes=sum(tree_size(volume, p) for p in paths),
        kv_keys=_run_keys(store, run_id),
        dry_run=dry_run,
        resumed=mark is not None,
    )
    if dry_run:
        return removal
    if mark is None:
        marks.put(run_id, {"keep_model": keep_model, "started_at": time.time()})
    for path in paths:
        _remove(volume, path)
    store.events(run_id).delete()
    store.stop_flag(run_id).clear()
    group = (store.records.get(run_id) or {}).get("metadata", {}).get("group_id")
    try:
        store.index.forget(run_id, group)
    except Exception as exc:  # the index is a cache of the records: a listing repairs it
        log.warning("run %s: not dropped from the runs index (%s)", run_id, exc)
    store.records.delete(run_id)
    marks.delete(run_id)
    return removal


def unfinished_deletes(store: RunStore) -> list[str]:
    """Ids of runs whose delete was interrupted (`delete_run` them again to finish)."""
    return store.kv(DELETING_NAMESPACE).keys()


def runs_training_from(store: RunStore, run_id: str) -> list[str]:
    """The unfinished runs whose `--from` is run `run_id`'s model or one of its checkpoints.

    They read that adapter when they start (and again when they resume), so removing it
    under them would end them in peft's error about a missing file.
    """
    source = trained_dir(run_id)
    found: set[str] = set()
    for status in (*UNFINISHED, "preempted"):
        after = None
        while True:
            runs, more = store.page(status=status, limit=100, after=after, reconcile=False)
            for run in runs:
                start = str(run.config.get("from_model") or "")
                if run.status == status and (start == source or start.startswith(source + "/")):
                    found.add(run.id)
            if not more or not runs:
                break
            after = runs[-1].id
    return sorted(found)


def _refuse_while_trained_from(store: RunStore, run_id: str) -> None:
    dependents = runs_training_from(store, run_id)
    if dependents:
        raise ConflictError(
            f"run {', '.join(dependents)} trains from {trained_dir(run_id)} (--from) and has not finished; "
            f"its model is not removed while it may still read it",
            hint=f"wait for it or stop it first: trainkit runs stop {dependents[0]} --wait",
        )


def delete_model(store: RunStore, path: str, *, dry_run: bool = False) -> Removal:
    """Remove a trained model (`trained/<run id>`, with its checkpoints), one checkpoint, or an export.

    The run's record and history stay (`delete_run` removes those). Refused while the
    run that writes the model is pending or running. A checkpoint loses its ``done``
    marker first, so an interrupted removal never leaves a checkpoint that looks
    complete; removing it again finishes the job.
    """
    from trainkit_core.export.merged import parse_stored_path
    from trainkit_core.models.trained.paths import DONE_MARKER, MODEL_PATH_PATTERN

    path = parse_stored_path(path)
    volume = store.models
    if not volume.exists(path):
        raise NotFoundError(f"nothing at {path!r} on volume {volume.name!r}", hint="trainkit models lists them")
    match = MODEL_PATH_PATTERN.fullmatch(path)
    if match is not None:
        run_id = match.group("run_id")
        data = store.records.get(run_id)
        if isinstance(data, dict) and data.get("status") in UNFINISHED:
            raise ConflictError(
                f"run {run_id} is {data['status']}: it is still writing {trained_dir(run_id)}",
                hint=f"stop it first: trainkit runs stop {run_id} --wait",
            )
        _refuse_while_trained_from(store, run_id)
    removal = Removal(paths=[path], bytes=tree_size(volume, path), dry_run=dry_run)
    if dry_run:
        return removal
    if match is not None and match.group("step") and volume.exists(f"{path}/{DONE_MARKER}"):
        volume.remove(f"{path}/{DONE_MARKER}")
    _remove(volume, path)
    return removal


#: Files younger than this are left to whatever may still be writing them (a sync, a checkpoint).
GC_GRACE_S = 3600.0


def collect_garbage(store: RunStore, data: Volume, *, dry_run: bool = False, now: float | None = None) -> Removal:
    """Remove what nothing references, and report the bytes freed.

    - dataset versions that are neither current nor used by any run (by dataset hash),
      abandoned syncs (a ``pending.json`` older than `GC_GRACE_S`), and the blobs no
      kept version uses;
    - on the models volume, checkpoints without their ``done`` marker of runs that
      are not running (an interrupted save or removal), and the staging folders of
      export jobs that died (``exports/.partial-*``, ``exports/.replaced-*``: a merge
      killed for memory leaves gigabytes there), and the exports of runs that no longer
      exist (a run deleted while its export ran), and the versions of dashboard
      components that no copy of their run's record points to any more (replaced ones);
    - on both, the temporary files of writes that were killed (``.tmp-*``: a killed
      sync's partial upload), where the volume can name them (`FolderVolume.partial_writes`).

    A symbolic link or file where trainkit keeps a model folder is left alone and
    named in `Removal.skipped`.

    Anything younger than `GC_GRACE_S` stays, so a sync or a save in flight is never
    cut short.
    """
    now = time.time() if now is None else now
    # The volume's copies too: a KV may forget a record (a Modal Dict entry idle for 7 days),
    # and a version an old run trained on must stay as long as its history does.
    history = store.history_records()
    by_id: dict[str, Any] = dict(history)
    by_id.update(store.records.items())
    records = [v for v in by_id.values() if isinstance(v, dict)]
    removal = Removal(dry_run=dry_run)

    def drop(volume: Volume, path: str) -> None:
        removal.paths.append(path)
        removal.bytes += tree_size(volume, path)
        if not dry_run:
            _remove(volume, path)

    young = now - GC_GRACE_S
    used_hashes = {str(r.get("dataset_hash")) for r in records if r.get("dataset_hash")}
    for path in _unused_dataset_files(data, used_hashes, young, already=removal.paths):
        drop(data, path)
    running = {str(r.get("id")) for r in records if r.get("status") in (*UNFINISHED, "preempted")}
    for path in _unfinished_checkpoints(store.models, running, young, skipped=removal.skipped):
        drop(store.models, path)
    for path in _unused_components(store, history, young):
        drop(store.models, path)
    for path in _leftover_exports(store.models, set(by_id), young):
        drop(store.models, path)
    for volume in (data, store.models):
        # A killed writer's temporary file (`.tmp-*`): listings hide them, the volume names them.
        partial_writes = getattr(volume, "partial_writes", None)
        for path in partial_writes(young) if partial_writes else []:
            removal.paths.append(path)
            removal.bytes += _size_of_partial(volume, path)
            if not dry_run:
                _remove(volume, path)
    return removal


def _unused_dataset_files(data: Volume, used_hashes: set[str], young: float, *, already: list[str]) -> Iterator[str]:
    """Per dataset: versions neither current nor used by a run, abandoned syncs, then the blobs and checks nothing kept uses.

    `already` is what the caller has dropped so far (the versions, when the blobs are
    looked at): a generator, so each path is dropped before the next is decided.
    """
    import json

    from trainkit_core.datasets.layout import (
        ROOT,
        Manifest,
        blobs_dir,
        current_path,
        manifest_path,
        verified_dir,
        versions_dir,
    )

    names = [e.path.rsplit("/", 1)[-1] for e in data.listdir(ROOT) if e.is_dir] if data.exists(ROOT) else []
    for name in names:
        current = (
            json.loads(data.read_bytes(current_path(name))).get("version") if data.exists(current_path(name)) else None
        )
        kept: list[str] = []
        versions = data.listdir(versions_dir(name)) if data.exists(versions_dir(name)) else []
        for entry in versions:
            version = entry.path.rsplit("/", 1)[-1]
            where = manifest_path(name, version)
            fresh = _touched_since(data, entry, young)
            complete = data.exists(where) and not data.exists(f"{entry.path}/pending.json")
            used_by_run = complete and Manifest.from_json(data.read_bytes(where), where=where).hash in used_hashes
            if version == current or (not complete and fresh) or used_by_run:
                kept.append(version)
            else:
                yield entry.path
        used: set[str] = set()
        for version in kept:
            where = manifest_path(name, version)
            if data.exists(where):
                used.update(i.sha256 for i in Manifest.from_json(data.read_bytes(where), where=where).files.values())
        if data.exists(blobs_dir(name)):
            for blob in data.listdir(blobs_dir(name)):
                sha = blob.path.rsplit("/", 1)[-1]
                if not blob.is_dir and sha not in used and blob.mtime <= young:
                    yield blob.path
        if data.exists(verified_dir(name)):
            kept_blobs = (
                {b.path.rsplit("/", 1)[-1] for b in data.listdir(blobs_dir(name))}
                if data.exists(blobs_dir(name))
                else set()
            )
            kept_blobs -= {p.rsplit("/", 1)[-1] for p in already if p.startswith(f"{blobs_dir(name)}/")}
            for marker in data.listdir(verified_dir(name)):
                if marker.path.rsplit("/", 1)[-1] not in kept_blobs:
                    yield marker.path  # a check that no blob backs any more


def _unfinished_checkpoints(models: Volume, running: set[str], young: float, *, skipped: list[str]) -> list[str]:
    """Checkpoints without their `done` marker of runs that are not running (an interrupted save or removal)."""
    from trainkit_core.models.trained.paths import DONE_MARKER

    found: list[str] = []
    if not models.exists("trained"):
        return found
    for entry in models.listdir("trained"):
        run_id = entry.path.rsplit("/", 1)[-1]
        folder = f"{entry.path}/checkpoints"
        if not entry.is_dir:
            note = f"{entry.path}: not a folder (a symbolic link or a file); left alone, remove it yourself"
            log.warning("gc: %s", note)
            skipped.append(note)
            continue
        if run_id in running or not models.exists(folder):
            continue
        for ckpt in models.listdir(folder):
            if ckpt.is_dir and not models.exists(f"{ckpt.path}/{DONE_MARKER}") and ckpt.mtime <= young:
                found.append(ckpt.path)
    return found


def _leftover_exports(models: Volume, runs: set[str], young: float) -> list[str]:
    """Staging folders of export jobs that died, and the exports of runs that no longer exist."""
    found: list[str] = []
    if not models.exists(EXPORTS_DIR):
        return found
    for entry in models.listdir(EXPORTS_DIR):
        name = entry.path.rsplit("/", 1)[-1]
        if not entry.is_dir or _touched_since(models, entry, young):
            continue
        owner = EXPORT_PATH_PATTERN.fullmatch(entry.path)
        if name.startswith(EXPORT_STAGING_PREFIXES):
            found.append(entry.path)
        elif owner is not None and owner.group("run_id") not in runs:
            found.append(entry.path)  # the export of a deleted run (deleted while it exported)
    return found


def _unused_components(store: RunStore, history: dict[str, dict[str, Any]], older_than: float) -> list[str]:
    """Replaced component versions of every run, by what its record and its history both point to."""
    from trainkit_core.runs.components import unused_component_files

    models = store.models
    if not models.exists("runs"):
        return []
    unused: list[str] = []
    for entry in models.listdir("runs"):
        run_id = entry.path.rsplit("/", 1)[-1]
        if not entry.is_dir:
            continue
        copies = [r for r in (store.records.get(run_id), history.get(run_id)) if isinstance(r, dict)]
        if copies:  # a run with no record at all is `delete_run`'s to remove, whole
            unused += unused_component_files(models, run_id, copies, older_than=older_than)
    return unused


def _size_of_partial(volume: Any, path: str) -> int:
    try:
        return int((volume.root / path).stat().st_size)
    except (AttributeError, OSError):
        return 0


def _touched_since(volume: Volume, entry: Any, since: float) -> bool:
    """Whether a folder or any file in it changed after `since` (a writer may still be at work)."""
    return entry.mtime > since or any(f.mtime > since for f in volume.listdir(entry.path, recursive=True))
