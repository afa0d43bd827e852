"""The second fixture provider (`tests/fixtures/trainkit-sqlvol`) passes the suite.

Its volumes are SQLite rows (jobs get staged folders), its jobs run detached, it
provisions and has settings of its own. Skipped when it is not installed, except in
the `plugin_discovery` nox session (``TRAINKIT_REQUIRE_DIRSTORE=1``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from store_races import first_writers_all_succeed

from trainkit_core.plugins.manager import build_plugin_manager
from trainkit_core.plugins.provider import get_provider
from trainkit_core.settings import Settings
from trainkit_core.testing import ProviderContract


@pytest.fixture(autouse=True, scope="module")
def _sqlvol_installed() -> None:
    """Skip where the fixture plugin is not installed (only `plugin_discovery` installs it), unless required.

    A fixture, not a check at import: a session that collects this module and selects
    none of its tests (`ml`) must not count a skip.
    """
    if os.environ.get("TRAINKIT_REQUIRE_DIRSTORE") != "1":
        pytest.importorskip("trainkit_sqlvol", reason="the trainkit-sqlvol fixture plugin is not installed")


class TestSqlvolProvider(ProviderContract):
    provider_name = "sqlvol"
    large_file_mb = 16


def test_its_settings_are_listed_and_reach_its_jobs(cli_env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", "providers", "--json"], env=cli_env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    sqlvol = {p["name"]: p for p in json.loads(done.stdout)}["sqlvol"]
    assert [row["variable"] for row in sqlvol["settings"]] == ["TRAINKIT_SQLVOL_DATABASE"]
    # Set in code, not in the environment: the job's processes find the call (kept in
    # that database) and write to it only if the settings object reached them.
    from trainkit_sqlvol import SqlvolSettings

    db = tmp_path / "elsewhere.db"
    settings = Settings.from_env()
    settings = settings.model_copy(
        update={"plugins": {"trainkit_sqlvol.SqlvolSettings": SqlvolSettings(database=str(db))}}
    )
    provider = get_provider("sqlvol", settings, pm=build_plugin_manager())
    assert provider.spawn("sleep", seconds=0, result="seen").wait(timeout=60) == "seen"
    assert db.exists() and "TRAINKIT_SQLVOL_DATABASE" not in os.environ


def test_staged_folders_stage_in_and_write_back_on_commit(tmp_path: Path) -> None:
    from trainkit_sqlvol import SqlVolume

    from trainkit_core.toolkit.staging import StagedVolumes

    volume = SqlVolume(tmp_path / "db.sqlite", "data")
    volume.write_bytes("keep.txt", b"kept")
    volume.write_bytes("change.txt", b"old")
    volume.write_bytes("drop/me.txt", b"gone soon")
    staged = StagedVolumes(lambda kind: volume, tmp_path / "job")
    folder = staged["data"]
    assert (folder / "keep.txt").read_bytes() == b"kept"
    (folder / "change.txt").write_bytes(b"new, longer")
    (folder / "new" / "file.txt").parent.mkdir()
    (folder / "new" / "file.txt").write_bytes(b"added")
    (folder / "drop" / "me.txt").unlink()
    assert volume.read_bytes("change.txt") == b"old", "visible before commit"
    staged.commit("data")
    assert volume.read_bytes("change.txt") == b"new, longer"
    assert volume.read_bytes("new/file.txt") == b"added"
    assert not volume.exists("drop/me.txt") and volume.read_bytes("keep.txt") == b"kept"
    # reload shows what others committed and drops what was not committed.
    volume.write_bytes("from-elsewhere.txt", b"other")
    (folder / "uncommitted.txt").write_bytes(b"lost")
    staged.reload("data")
    assert (folder / "from-elsewhere.txt").read_bytes() == b"other"
    assert not (folder / "uncommitted.txt").exists()


def test_first_writers_of_a_fresh_database_all_succeed(tmp_path: Path) -> None:
    """The first openers of a new database race to switch it to WAL; SQLite refuses all but
    one at once, without its busy timeout. Each round is a fresh file whose first twelve
    writers start together (the core store met the same race in CI)."""
    from trainkit_sqlvol import SqlKV

    first_writers_all_succeed(lambda round_: SqlKV(tmp_path / f"round-{round_}.db", "runs"), rounds=100)
