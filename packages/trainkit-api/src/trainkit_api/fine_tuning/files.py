"""Uploaded fine-tuning files: each one a trainkit dataset on the data volume.

An upload is checked by the same reader `trainkit validate` uses, before anything is kept:
a bad line is refused with its file name, line and reason, and nothing is stored. A good
file is synced as the dataset ``file-<first 24 hex digits of its sha256>``, so the id says
what the content is: the same bytes uploaded twice are one file (and one dataset), and a
training job reads exactly the bytes that were checked.

The dataset's format is read from the file's first line
(`trainkit_core.datasets.openai_files.detect_format`); a job then checks that its method
trains on that format.

The record of each file (name, size, time, dataset) is kept in the key-value store; the
content is the dataset's blob on the data volume, which `content` reads back.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from trainkit_api.errors import RequestError
from trainkit_api.state import ApiState
from trainkit_core.errors import ConflictError, NotFoundError

#: The key-value namespace of the file records (key: the file id).
NAMESPACE = "openai-files"
PURPOSE = "fine-tune"
#: The purpose of the metrics file a job writes (`objects.results_csv`).
RESULTS_PURPOSE = "fine-tune-results"
RESULTS_PREFIX = "file-results-"
_ID = re.compile(r"^file-[0-9a-f]{24}$")


def sync_folder(state: ApiState, name: str, files: dict[str, bytes], fmt: str, *, eval_file: str | None = None) -> None:
    """Write a dataset folder of `files` (train: every file but `eval_file`) and sync it; `DatasetInvalidError` when bad."""
    from trainkit_core.datasets.openai_files import spec_text
    from trainkit_core.datasets.sync import LOCK_NAMESPACE, sync_to_volume

    spec = spec_text(name, fmt, [f for f in files if f != eval_file], [eval_file] if eval_file else None)
    with tempfile.TemporaryDirectory(prefix="trainkit-upload-") as tmp:
        folder = Path(tmp) / name
        folder.mkdir()
        for rel, data in files.items():
            (folder / rel).write_bytes(data)
        (folder / "dataset.toml").write_text(spec)
        sync_to_volume(state.provider.volume("data"), folder, lock_kv=state.provider.kv(LOCK_NAMESPACE))


def upload(state: ApiState, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
    """Check `content` and keep it as a dataset; the file object. `RequestError` naming the line when it is bad."""
    from trainkit_core.datasets.openai_files import detect_format, safe_filename
    from trainkit_core.datasets.validate import DatasetInvalidError

    if purpose != PURPOSE:
        raise RequestError(
            f"purpose {purpose[:40]!r} is not supported: trainkit keeps fine-tuning files only",
            param="purpose",
            code="invalid_purpose",
            hint=f'upload with purpose="{PURPOSE}"',
        )
    if not content.strip():
        raise RequestError("the file is empty", param="file", code="invalid_file")
    sha256 = hashlib.sha256(content).hexdigest()
    file_id = f"file-{sha256[:24]}"
    name = safe_filename(filename)
    fmt = detect_format(content)
    try:
        sync_folder(state, file_id, {name: content}, fmt)
    except DatasetInvalidError as exc:
        problems = exc.report.error_text()
        raise RequestError(
            f"{filename or name} is not a valid fine-tuning file ({fmt} data):\n{problems}",
            param="file",
            code="invalid_file",
            hint="fix the lines named above and upload the file again",
        ) from None
    record = {
        "id": file_id,
        "object": "file",
        "bytes": len(content),
        "created_at": int(time.time()),
        "filename": filename or name,
        "purpose": PURPOSE,
        "status": "processed",
        "status_details": None,
        "format": fmt,
        "dataset": file_id,
        "examples": sum(1 for line in content.splitlines() if line.strip()),  # one per line: the file passed
        "sha256": sha256,
    }
    state.kv(NAMESPACE).put(file_id, record)
    return public(record)


def public(record: dict[str, Any]) -> dict[str, Any]:
    """The file object as OpenAI returns it (trainkit's `format` and `dataset` ride along)."""
    return {key: value for key, value in record.items() if key != "sha256"}


def get(state: ApiState, file_id: str, *, param: str | None = None) -> dict[str, Any]:
    """The record of uploaded file `file_id`; `NotFoundError`, or `RequestError` naming `param` when it names one."""
    record = state.kv(NAMESPACE).get(file_id) if _ID.fullmatch(file_id) else None
    if isinstance(record, dict):
        return record
    if param is not None:
        raise RequestError(
            f"{param} {file_id[:60]!r}: no such file", param=param, code="invalid_file", hint="upload it first"
        )
    raise NotFoundError(f"no file {file_id[:60]!r}", hint="GET /v1/files lists the uploaded files")


def content(state: ApiState, file_id: str) -> bytes:
    """The bytes uploaded as `file_id`, read back from its dataset on the data volume."""
    from trainkit_core.datasets.layout import blob_path

    record = get(state, file_id)
    return state.provider.volume("data").read_bytes(blob_path(record["dataset"], record["sha256"]))


def listing(state: ApiState) -> list[dict[str, Any]]:
    """Every uploaded file's record, newest first."""
    records = [value for _, value in state.kv(NAMESPACE).items() if isinstance(value, dict)]
    return sorted(records, key=lambda r: (-int(r.get("created_at", 0)), r["id"]))


def delete(state: ApiState, file_id: str, jobs_using: list[str]) -> dict[str, Any]:
    """Forget `file_id` and remove its dataset from the data volume.

    Refused (409) while a job that reads it has not ended (`jobs_using`): its run reads the
    dataset when it starts, and a resume reads it again.
    """
    from trainkit_core.datasets.layout import ROOT

    record = get(state, file_id)
    if jobs_using:
        raise ConflictError(
            f"file {file_id} is the data of jobs that have not ended: {', '.join(jobs_using)}",
            hint="cancel them or wait for them to end, then delete the file",
        )
    state.kv(NAMESPACE).delete(file_id)
    volume = state.provider.volume("data")
    folder = f"{ROOT}/{record['dataset']}"
    if volume.exists(folder):
        volume.remove(folder, recursive=True)
    return {"id": file_id, "object": "file", "deleted": True}
