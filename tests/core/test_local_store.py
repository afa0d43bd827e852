"""Local volumes and key-value store: what the conformance suite cannot see from outside."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from store_races import first_writers_all_succeed

from trainkit_core import get_provider
from trainkit_core.errors import MissingExtraError, NotFoundError, UsageError
from trainkit_core.local.plugin import LocalDeployment, volume_root
from trainkit_core.settings import Settings
from trainkit_core.toolkit.folder_volume import FolderVolume
from trainkit_core.toolkit.sqlite_kv import LocalKV, db_path
from trainkit_core.toolkit.volume_paths import clean_relative


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../up", "/abs"])
def test_volume_names_that_escape_are_refused(trainkit_home: Path, name: str) -> None:
    with pytest.raises(UsageError):
        volume_root(trainkit_home, name)
    assert not (trainkit_home / "up").exists() and not Path("/abs").exists()


@pytest.mark.parametrize(
    ("path", "clean"),
    [("a/./b", "a/b"), ("a//b/", "a/b"), ("./x.txt", "x.txt"), ("dir/ünï cödé.txt", "dir/ünï cödé.txt")],
)
def test_harmless_paths_are_normalised(path: str, clean: str) -> None:
    assert clean_relative(path) == clean


@pytest.mark.parametrize("path", ["a\\..\\b", "C:/x", "a/\x00b", "a/\nb", "x/../y"])
def test_odd_paths_are_refused(path: str) -> None:
    with pytest.raises(UsageError):
        clean_relative(path)


def test_a_folder_volume_wraps_a_mount_point(tmp_path: Path) -> None:
    mount = tmp_path / "mnt" / "data"
    vol = FolderVolume(mount)
    vol.write_bytes("x/y.txt", b"1")
    assert (mount / "x" / "y.txt").read_bytes() == b"1"
    assert vol.name == "data"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(trainkit_home: Path) -> None:
    vol = FolderVolume(trainkit_home / "v")
    vol.write_bytes("f.txt", b"old")

    def explode(out: object) -> None:
        out.write(b"half")  # type: ignore[attr-defined]
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        vol._atomic_write(vol.root / "f.txt", explode)
    assert vol.read_bytes("f.txt") == b"old"
    assert [p.name for p in vol.root.iterdir()] == ["f.txt"]


def test_kv_is_sqlite_in_wal_mode(trainkit_home: Path) -> None:
    LocalKV(trainkit_home, "runs").put("k", 1)
    with sqlite3.connect(db_path(trainkit_home)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_first_writers_of_a_fresh_home_all_succeed(tmp_path: Path) -> None:
    """Turning a new database file to WAL said "database is locked" to all but one opener at once.

    CI met it in the fault tests as one of six parallel eval uploads answered 500.
    Each round is a fresh home whose first twelve writers start together.
    """
    # About one round in 25 failed before the fix.
    first_writers_all_succeed(lambda round_: LocalKV(tmp_path / f"home-{round_}", "runs"), rounds=150)


def test_kv_update_is_atomic_across_threads(trainkit_home: Path) -> None:
    kv = LocalKV(trainkit_home, "counters")
    kv.put("n", 0)

    def bump() -> None:
        for _ in range(50):
            kv.update("n", lambda n: n + 1)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert kv.get("n") == 200


def test_kv_rejects_a_blank_namespace(trainkit_home: Path) -> None:
    with pytest.raises(UsageError):
        LocalKV(trainkit_home, "")


def test_deploy_creates_the_volumes_and_the_store(trainkit_home: Path) -> None:
    deployment = get_provider("local", Settings.from_env()).deployment()
    assert deployment.status().state == "not-deployed"
    assert deployment.deploy().state == "ready"
    for name in ("trainkit-data", "trainkit-models", "trainkit-eval", "trainkit-hf-cache"):
        assert (trainkit_home / "volumes" / name).is_dir()


def test_check_names_the_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainkit_core.local import plugin
    from trainkit_core.plugins import jobs

    monkeypatch.setitem(jobs.JOBS, "needs-gpu", "trainkit_core.jobs.ping:ping")
    monkeypatch.setitem(jobs.JOB_EXTRAS, "needs-gpu", "gpu")
    monkeypatch.setitem(plugin.EXTRA_MODULES, "gpu", ("trainkit_no_such_module_xyz",))
    deployment = LocalDeployment(Settings.from_env())
    with pytest.raises(MissingExtraError, match=r"trainkit_no_such_module_xyz") as err:
        deployment.check(["ping", "needs-gpu"])
    assert err.value.hint == "pip install 'trainkit-core[gpu]'"
    with pytest.raises(NotFoundError, match="unknown job function 'nope'"):
        deployment.check(["nope"])
