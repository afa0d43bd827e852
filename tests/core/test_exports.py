"""Export paths and `download` checks (torch-free; the export job runs in tests/e2e/test_export.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import ConflictError, NotFoundError, UsageError
from trainkit_core.export.merged import check_export_request, download, export_path, parse_stored_path
from trainkit_core.settings import ProviderSettings, Settings

RUN = "run-20261201-010203-abcdef"


def test_export_paths_follow_the_model_path() -> None:
    assert export_path(check_export_request(f"trained/{RUN}")[0]) == f"exports/{RUN}"
    ckpt = check_export_request(f"trained/{RUN}/checkpoints/00000040", "bfloat16")
    assert export_path(ckpt[0]) == f"exports/{RUN}-step00000040" and ckpt[1] == "bfloat16"
    with pytest.raises(UsageError, match="unknown export dtype"):
        check_export_request(f"trained/{RUN}", "int4")
    for bad in ("exports/../trained", f"exports/{RUN}/model.safetensors", "/etc", f"runs/{RUN}/record.json"):
        with pytest.raises(UsageError):
            parse_stored_path(bad)
    assert parse_stored_path(f"runs/{RUN}/tensorboard/") == f"runs/{RUN}/tensorboard"


def test_download_takes_only_a_finished_export_into_an_empty_folder(trainkit_home: Path, tmp_path: Path) -> None:
    volume = get_provider("local", Settings(provider=ProviderSettings(home=trainkit_home))).volume("models")
    volume.write_bytes(f"exports/{RUN}/model.safetensors", b"w" * 10)
    with pytest.raises(NotFoundError, match="no finished export"):  # the info file is written last
        download(volume, f"exports/{RUN}", tmp_path / "a")
    volume.write_bytes(f"exports/{RUN}/trainkit_export.json", b"{}")
    assert download(volume, f"exports/{RUN}", tmp_path / "a") == 12
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "mine.txt").write_text("keep me")
    with pytest.raises(ConflictError):
        download(volume, f"exports/{RUN}", tmp_path / "b")
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["mine.txt"]
