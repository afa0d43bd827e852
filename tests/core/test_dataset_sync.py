"""Sync: only changed content is sent, the switch is atomic, a killed sync harms nothing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.datasets.layout import blob_path, current_path, manifest_path, versions_dir
from trainkit_core.datasets.reader import read_synced
from trainkit_core.datasets.sync import sync_dataset, sync_to_volume
from trainkit_core.datasets.validate import DatasetInvalidError, validate_synced
from trainkit_core.errors import ConflictError, NotFoundError, UsageError
from trainkit_core.toolkit.folder_volume import FolderVolume
from trainkit_core.toolkit.sqlite_kv import LocalKV

TRAIN_FILES = [f"part-{i}.jsonl" for i in range(6)]


def example(i: int, tag: str = "") -> str:
    return json.dumps(
        {"messages": [{"role": "user", "content": f"q{i}{tag}"}, {"role": "assistant", "content": f"a{i}{tag}"}]}
    )


def write_dataset(folder: Path, tag: str = "", *, files: list[str] = TRAIN_FILES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"name": folder.name, "train": files, "eval": ["eval.jsonl"]}
    (folder / "dataset.toml").write_text(
        f'name = "{spec["name"]}"\nformat = "chat"\ntrain = {json.dumps(files)}\neval = ["eval.jsonl"]\n'
    )
    for n, file in enumerate(files):
        (folder / file).write_text("\n".join(example(n * 10 + j, tag) for j in range(5)) + "\n")
    (folder / "eval.jsonl").write_text(example(999) + "\n")
    return folder


@pytest.fixture
def volume(trainkit_home: Path) -> FolderVolume:
    return FolderVolume(trainkit_home / "volumes" / "trainkit-data")


@pytest.fixture
def kv(trainkit_home: Path) -> LocalKV:
    return LocalKV(trainkit_home, "datasets")


def snapshot(volume: FolderVolume) -> dict[str, tuple[int, float]]:
    if not volume.exists(""):
        return {}
    return {e.path: (e.size, e.mtime) for e in volume.listdir("", recursive=True)}


def test_first_sync_then_read_on_the_job_side(tmp_path: Path, volume: FolderVolume, kv: LocalKV) -> None:
    folder = write_dataset(tmp_path / "ds")
    result = sync_to_volume(volume, folder, lock_kv=kv)
    assert not result.unchanged
    assert result.files_sent == sorted(["dataset.toml", "eval.jsonl", *TRAIN_FILES])
    assert result.uploaded_bytes == sum((folder / f).stat().st_size for f in result.files_sent)
    current = json.loads(volume.read_bytes(current_path("ds")))
    assert current["version"] == result.version and current["hash"] == result.hash
    data = read_synced(volume.root, "ds")
    assert (data.version, data.hash, data.format) == (result.version, result.hash, "chat")
    assert len(data.train) == 30 and data.eval == [json.loads(example(999))]
    assert validate_synced(volume, "ds").ok()
    assert kv.keys() == []  # the lock is released


def test_unchanged_resync_sends_nothing(tmp_path: Path, volume: FolderVolume, kv: LocalKV) -> None:
    folder = write_dataset(tmp_path / "ds")
    first = sync_to_volume(volume, folder, lock_kv=kv)
    before = snapshot(volume)
    again = sync_to_volume(volume, folder, lock_kv=kv)
    assert again.unchanged and again.uploaded_bytes == 0 and again.files_sent == []
    assert (again.version, again.hash) == (first.version, first.hash)
    assert snapshot(volume) == before  # not a byte written


def test_changing_one_file_sends_only_that_file(tmp_path: Path, volume: FolderVolume, kv: LocalKV) -> None:
    folder = write_dataset(tmp_path / "ds")
    first = sync_to_volume(volume, folder, lock_kv=kv)
    with open(folder / "part-3.jsonl", "a") as handle:
        handle.write(example(77) + "\n")
    second = sync_to_volume(volume, folder, lock_kv=kv)
    assert second.files_sent == ["part-3.jsonl"]
    assert second.uploaded_bytes == (folder / "part-3.jsonl").stat().st_size
    assert len(second.files_reused) == len(TRAIN_FILES) + 1  # the other parts, eval.jsonl and dataset.toml
    assert second.version != first.version and second.hash != first.hash
    assert len(read_synced(volume.root, "ds").train) == 31
    assert volume.exists(manifest_path("ds", first.version))  # the previous version is kept


def test_invalid_dataset_writes_nothing(tmp_path: Path, volume: FolderVolume, kv: LocalKV) -> None:
    folder = write_dataset(tmp_path / "ds")
    with open(folder / "part-2.jsonl", "a") as handle:
        handle.write('{"messages": [{"role": "user", "content": "no answer"}]}\n')
    before = snapshot(volume)
    with pytest.raises(DatasetInvalidError, match=r"part-2.jsonl:6: error \[last-not-assistant\]") as info:
        sync_to_volume(volume, folder, lock_kv=kv)
    assert info.value.report.errors[0].file == "part-2.jsonl"
    assert snapshot(volume) == before
    assert not volume.exists("datasets")


def test_warnings_block_only_a_strict_sync(tmp_path: Path, volume: FolderVolume) -> None:
    folder = write_dataset(tmp_path / "ds")
    with open(folder / "part-0.jsonl", "a") as handle:
        handle.write(example(0) + "\n")  # a duplicate of line 1
    with pytest.raises(DatasetInvalidError, match="duplicate"):
        sync_to_volume(volume, folder, strict=True)
    assert not volume.exists("datasets")
    result = sync_to_volume(volume, folder)
    assert [p.code for p in result.report.warnings] == ["duplicate"] if result.report else False


def test_failed_change_keeps_the_previous_version(tmp_path: Path, volume: FolderVolume) -> None:
    folder = write_dataset(tmp_path / "ds")
    first = sync_to_volume(volume, folder)
    (folder / "part-1.jsonl").write_text("{broken\n")
    with pytest.raises(DatasetInvalidError):
        sync_to_volume(volume, folder)
    assert json.loads(volume.read_bytes(current_path("ds")))["version"] == first.version
    assert len(read_synced(volume.root, "ds").train) == 30


KILLABLE = """
import sys, time
from pathlib import Path
from trainkit_core.datasets.sync import sync_to_volume
from trainkit_core.toolkit.sqlite_kv import LocalKV
from trainkit_core.toolkit.folder_volume import FolderVolume

class SlowVolume(FolderVolume):
    sent = 0

    def put_file(self, local_path, path):
        super().put_file(local_path, path)
        self.sent += 1
        print("sent", path, flush=True)
        if self.sent == 2:
            time.sleep(120)  # the test kills it here

home, folder = Path(sys.argv[1]), Path(sys.argv[2])
sync_to_volume(SlowVolume(home / "volumes" / "trainkit-data"), folder, lock_kv=LocalKV(home, "datasets"))
"""


@pytest.mark.slow
def test_killed_sync_leaves_previous_version_and_next_sync_completes(
    tmp_path: Path, trainkit_home: Path, volume: FolderVolume, kv: LocalKV
) -> None:
    folder = write_dataset(tmp_path / "ds")
    first = sync_to_volume(volume, folder, lock_kv=kv)
    write_dataset(folder, tag="-v2")  # every train file changes
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLABLE, str(trainkit_home), str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        sent = [proc.stdout.readline() for _ in range(2)] if proc.stdout else []
        assert all(line.startswith("sent ") for line in sent), sent
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    # Killed after two of seven files: the old version is current, complete and readable.
    assert json.loads(volume.read_bytes(current_path("ds")))["version"] == first.version
    data = read_synced(volume.root, "ds")
    assert data.version == first.version and data.train[0]["messages"][0]["content"] == "q0"
    assert validate_synced(volume, "ds").ok()
    abandoned = [
        e.path.rsplit("/", 1)[-1]
        for e in volume.listdir(versions_dir("ds"))
        if e.path.rsplit("/", 1)[-1] != first.version
    ]
    assert len(abandoned) == 1 and kv.keys() == ["sync-lock/ds"]  # its pending version and its lock
    # The next sync takes over the dead process's lock, reuses what it sent and checked
    # (the first file; the second was killed before its check), finishes.
    second = sync_to_volume(volume, folder, lock_kv=kv)
    assert not second.unchanged and len(second.files_sent) == len(TRAIN_FILES) - 1
    assert second.removed_versions == abandoned
    assert read_synced(volume.root, "ds").train[0]["messages"][0]["content"] == "q0-v2"
    assert kv.keys() == []


def test_a_live_sync_holds_the_lock(tmp_path: Path, volume: FolderVolume, kv: LocalKV) -> None:
    folder = write_dataset(tmp_path / "ds")
    kv.put("sync-lock/ds", {"host": socket.gethostname(), "pid": os.getpid(), "started_at": time.time()})
    with pytest.raises(ConflictError, match="another sync of dataset 'ds' is running"):
        sync_to_volume(volume, folder, lock_kv=kv)
    assert not volume.exists("datasets")
    # A lock from another machine expires after LOCK_STALE_S.
    kv.put("sync-lock/ds", {"host": "elsewhere", "pid": 1, "started_at": time.time() - 7 * 3600})
    assert not sync_to_volume(volume, folder, lock_kv=kv).unchanged


def test_old_versions_and_their_blobs_are_removed(tmp_path: Path, volume: FolderVolume) -> None:
    folder = write_dataset(tmp_path / "ds")
    versions = []
    for tag in ("", "-b", "-c", "-d"):
        write_dataset(folder, tag=tag)
        versions.append(sync_to_volume(volume, folder, keep_versions=3).version)
    kept = sorted(e.path.rsplit("/", 1)[-1] for e in volume.listdir(versions_dir("ds")))
    assert kept == sorted(versions[1:])
    blobs = {e.path.rsplit("/", 1)[-1] for e in volume.listdir("datasets/ds/blobs")}
    used = set()
    for version in kept:
        used |= {f["sha256"] for f in json.loads(volume.read_bytes(manifest_path("ds", version)))["files"].values()}
    assert blobs == used


def test_sync_through_the_provider_facade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trainkit_home: Path) -> None:
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(tmp_path))
    write_dataset(tmp_path / "facade")
    provider = get_provider("local")
    seen: list[tuple[int, int]] = []
    result = sync_dataset(provider, "facade", progress=lambda sent, total: seen.append((sent, total)))
    assert seen[0][0] == 0 and seen[-1] == (result.uploaded_bytes, result.uploaded_bytes)
    assert (
        read_synced(provider.settings.provider.home / "volumes" / "trainkit-data", "facade").version == result.version
    )
    assert sync_dataset(provider, tmp_path / "facade").unchanged  # a folder works as well as a name
    with pytest.raises(NotFoundError, match="no dataset 'missing'"):
        sync_dataset(provider, "missing")


def test_reader_refuses_never_synced_and_corrupt_data(tmp_path: Path, volume: FolderVolume) -> None:
    with pytest.raises(NotFoundError, match="never synced"):
        read_synced(volume.root, "ds")
    with pytest.raises(NotFoundError, match="never synced"):
        validate_synced(volume, "ds")
    folder = write_dataset(tmp_path / "ds")
    result = sync_to_volume(volume, folder)
    sha = json.loads(volume.read_bytes(manifest_path("ds", result.version)))["files"]["part-0.jsonl"]["sha256"]
    volume.write_bytes(blob_path("ds", sha), b"tampered\n")
    with pytest.raises(UsageError, match=r"part-0\.jsonl does not match its hash"):
        read_synced(volume.root, "ds")


@pytest.mark.parametrize("name", ["../etc", "a/b", "", ".hidden"])
def test_bad_names_are_refused_before_any_path_is_built(volume: FolderVolume, name: str) -> None:
    with pytest.raises(UsageError, match=r"dataset name .* is invalid"):
        read_synced(volume.root, name)
    with pytest.raises(UsageError, match=r"dataset name .* is invalid"):
        validate_synced(volume, name)


def test_bad_spec_or_missing_file_writes_nothing(tmp_path: Path, volume: FolderVolume) -> None:
    folder = write_dataset(tmp_path / "ds")
    (folder / "part-4.jsonl").unlink()
    with pytest.raises(DatasetInvalidError, match=r"part-4\.jsonl: error \[file-missing\]"):
        sync_to_volume(volume, folder)
    (folder / "dataset.toml").write_text('name = "ds"\nformat = "csv"\ntrain = ["part-0.jsonl"]\n')
    with pytest.raises(DatasetInvalidError, match=r"dataset\.toml:2: error \[spec-invalid\] format"):
        sync_to_volume(volume, folder)
    assert not volume.exists("datasets")


def test_corrupt_current_json_is_named(tmp_path: Path, volume: FolderVolume) -> None:
    sync_to_volume(volume, write_dataset(tmp_path / "ds"))
    volume.write_bytes(current_path("ds"), b"{not json")
    with pytest.raises(UsageError, match=r"corrupt .*current\.json"):
        read_synced(volume.root, "ds")
    with pytest.raises(UsageError, match=r"corrupt datasets/ds/current\.json on volume"):
        validate_synced(volume, "ds")
    assert not sync_to_volume(volume, tmp_path / "ds").unchanged  # a sync repairs it
    assert validate_synced(volume, "ds").ok()


def test_a_lock_this_process_failed_to_release_does_not_block_it(volume: FolderVolume, kv: LocalKV) -> None:
    """A store that refused the delete leaves our own lock behind; our next writer takes it over."""
    from trainkit_core.toolkit.kv_lock import kv_lock

    with kv_lock(kv, "record/x", busy="busy"):
        left = kv.get("record/x")
    kv.put("record/x", left)  # as if the release had failed
    started = time.monotonic()
    with kv_lock(kv, "record/x", busy="busy", wait_s=5):
        assert kv.get("record/x")["token"] != left["token"]
    assert time.monotonic() - started < 2 and kv.get("record/x") is None
