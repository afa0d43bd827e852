"""A full disk: a clear error of its own (what, where, how much), atomic writes, and the cause kept on the call.

The state folder (``TRAINKIT_HOME``) is a real small file system, a tmpfs mounted for
the test, which needs root (CI's containers run as root); elsewhere these tests are
skipped, saying why.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import run_main

from trainkit_core.errors import OutOfSpaceError
from trainkit_core.testing.small_disk import fill, mount_tmpfs, unmount


@pytest.fixture
def small_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 5 MB tmpfs as the trainkit home."""
    home = tmp_path / "small-home"
    reason = mount_tmpfs(home, "5m")
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("TRAINKIT_HOME", str(home))
    try:
        yield home
    finally:
        from trainkit_core.local.runner import LocalRunner

        try:
            (home / "filler.bin").unlink(missing_ok=True)
            for handle in LocalRunner(home).unfinished():
                handle.cancel(grace_s=1.0)
        finally:
            unmount(home)


def big_dataset(datasets: Path, name: str, megabytes: int) -> Path:
    folder = datasets / name
    folder.mkdir(parents=True)
    (folder / "dataset.toml").write_text(f'name = "{name}"\ntrain = ["train.jsonl"]\n')
    line = {"messages": [{"role": "user", "content": "q " + "x" * 900}, {"role": "assistant", "content": "a"}]}
    with open(folder / "train.jsonl", "w") as out:
        for i in range(megabytes * 1100):
            line["messages"][1]["content"] = f"a{i}"
            out.write(json.dumps(line) + "\n")
    return folder


def test_sync_on_a_full_disk_is_a_clear_error_and_keeps_the_previous_version(
    small_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = tmp_path / "datasets"
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(datasets))
    big_dataset(datasets, "big", 1)
    code, output = run_main("sync", "big")
    assert code == 0, output
    shutil.rmtree(datasets / "big")
    big_dataset(datasets, "big", 8)  # over the 5 MB of the home
    code, output = run_main("sync", "big")
    assert code == OutOfSpaceError.exit_code and "Traceback" not in output, output
    assert "out of disk space writing" in output and "bytes needed" in output and "bytes free" in output
    assert str(small_home) in output
    # Nothing half-written: the first version is still current and reads whole; no partial blob is left.
    code, output = run_main("validate", "big")
    assert code == 0 and "1100 train" in output, output
    assert not list(small_home.rglob(".tmp-*"))


@pytest.mark.slow
def test_a_job_that_dies_of_a_full_disk_says_so_once_space_is_freed(small_home: Path, tmp_path: Path) -> None:
    from trainkit_core import get_provider

    provider = get_provider("local")
    release = tmp_path / "release"  # outside the full file system
    handle = provider.spawn("sleep", seconds=120, until_file=str(release), say="job started")
    deadline = time.monotonic() + 60
    while "job started" not in handle.logs() and time.monotonic() < deadline:
        time.sleep(0.1)
    filler = fill(small_home)
    release.touch()  # the job returns, and cannot record its result on the full disk
    time.sleep(3)
    filler.unlink()  # space freed: the supervisor records the cause
    deadline = time.monotonic() + 60
    while not handle.status().done and time.monotonic() < deadline:
        time.sleep(0.2)
    status = handle.status()
    assert status.state == "failed" and "out of disk space" in (status.error or ""), status
