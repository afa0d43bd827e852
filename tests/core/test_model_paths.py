"""Model paths from users: hostile ones are refused before any file is opened.

Torch-free. "Before any file is opened" is proven twice: the volume given to
`check_model_path` records every call (none happens for a hostile path), and a
Python audit hook records every `open`/`listdir`/`scandir` during validation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.models.trained import (
    check_model_path,
    default_model_for_preset,
    list_trained_models,
    local_model_dir,
    parse_model_path,
)
from trainkit_core.toolkit.folder_volume import FolderVolume

RUN = "run-20261130-120000-abcdef"
OTHER = "run-20261130-130000-123456"

HOSTILE = [
    "/etc/passwd",
    f"/work/models/trained/{RUN}",
    f"../trained/{RUN}",
    "trained/../../etc/passwd",
    f"trained/{RUN}/../{OTHER}",
    f"trained/{RUN}/checkpoints/00000050/../../..",
    "trained%2F..%2F..%2Fetc%2Fpasswd",
    "trained/%2e%2e/%2e%2e/etc/passwd",
    f"trained/{RUN}%00",
    f"trained/{RUN}\x00/etc/passwd",
    "trained\\..\\..\\etc\\passwd",
    "C:\\Windows\\system32\\config",
    "~/.ssh/id_rsa",
    "file:///etc/passwd",
    "trained/run-1",
    f"trained/{RUN.upper()}",
    f"trained/{RUN}/checkpoints/50",
    f"trained/{RUN}/adapter_model.safetensors",
    "datasets/demo",
    f"trained//{RUN}",
    f"trained/./{RUN}",
    f"trained/{RUN}\n",
    f"ｔrained/{RUN}",  # fullwidth letter
    "trained/．．/etc",  # fullwidth dots
    f"trained/{RUN}／..",  # fullwidth slash
    "",
    f"trained/{RUN}/" + "a" * 300,
    "trained",
    f"runs/{RUN}/record.json",
]


class SpyVolume:
    """A volume that records every call, so a test sees that none happened."""

    name = "spy"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, attr: str):  # type: ignore[no-untyped-def]
        def record(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.calls.append(attr)
            raise AssertionError(f"the volume was touched: {attr}{args}")

        return record


_WATCHING: list[list[tuple[str, str]]] = []


def _audit(event: str, args: tuple) -> None:  # type: ignore[type-arg]
    if _WATCHING and event in ("open", "os.listdir", "os.scandir", "os.chdir"):
        _WATCHING[-1].append((event, str(args[0]) if args else ""))


sys.addaudithook(_audit)


@pytest.mark.parametrize("path", HOSTILE, ids=[repr(p)[:40] for p in HOSTILE])
def test_hostile_path_refused_before_any_file_is_opened(path: str) -> None:
    volume = SpyVolume()
    seen: list[tuple[str, str]] = []
    _WATCHING.append(seen)
    try:
        with pytest.raises(UsageError) as info:
            check_model_path(path, volume)  # type: ignore[arg-type]
    finally:
        _WATCHING.pop()
    assert volume.calls == []
    assert seen == [], f"files were opened while validating {path!r}: {seen}"
    assert "model path" in info.value.message


def test_at_least_fifteen_distinct_hostile_paths() -> None:
    assert len(set(HOSTILE)) >= 15


def test_the_watchers_do_see_file_access(tmp_path: Path) -> None:
    """The two witnesses above are live: a valid path reaches the volume, an open is recorded."""
    with pytest.raises(AssertionError, match="volume was touched"):
        check_model_path(f"trained/{RUN}", SpyVolume())  # type: ignore[arg-type]
    seen: list[tuple[str, str]] = []
    _WATCHING.append(seen)
    try:
        (tmp_path / "x").write_text("x")
    finally:
        _WATCHING.pop()
    assert seen and seen[0][0] == "open"


@pytest.mark.parametrize("value", [None, 123, b"trained/x", ["trained", RUN]])
def test_non_strings_refused(value: object) -> None:
    with pytest.raises(UsageError, match="must be a string"):
        parse_model_path(value)


def test_valid_paths_parse() -> None:
    ref = parse_model_path(f"trained/{RUN}")
    assert (ref.path, ref.run_id, ref.step) == (f"trained/{RUN}", RUN, None)
    ref = parse_model_path(f"trained/{RUN}/checkpoints/00000050/")
    assert (ref.path, ref.run_id, ref.step, ref.run_dir) == (
        f"trained/{RUN}/checkpoints/00000050",
        RUN,
        50,
        f"trained/{RUN}",
    )


def _write_model(folder: Path, *, preset: str = "tiny", created: float = 1.0, card: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "x"}))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 100)
    if card:
        (folder / "trained_model.json").write_text(
            json.dumps(
                {
                    "base_model": "trainkit/tiny-gemma",
                    "preset": preset,
                    "chat_format": "gemma3",
                    "dataset_id": "demo",
                    "created_at": created,
                    "metrics": {"final_loss": 0.4},
                }
            )
        )


@pytest.fixture
def models(tmp_path: Path) -> FolderVolume:
    return FolderVolume(tmp_path / "models", "models")


def test_existing_model_and_checkpoint_pass(models: FolderVolume) -> None:
    _write_model(models.root / "trained" / RUN)
    ckpt = models.root / "trained" / RUN / "checkpoints" / "00000050"
    _write_model(ckpt, card=False)
    (ckpt / "done").write_text("")
    assert check_model_path(f"trained/{RUN}", models).step is None
    assert check_model_path(f"trained/{RUN}/checkpoints/00000050", models).step == 50
    assert local_model_dir(parse_model_path(f"trained/{RUN}"), models.root) == models.root / "trained" / RUN


def test_missing_model_adapter_or_done_marker(models: FolderVolume) -> None:
    with pytest.raises(NotFoundError, match="no trained model"):
        check_model_path(f"trained/{RUN}", models)
    folder = models.root / "trained" / RUN
    folder.mkdir(parents=True)
    (folder / "trained_model.json").write_text("{}")
    with pytest.raises(NotFoundError, match=r"adapter_config\.json"):
        check_model_path(f"trained/{RUN}", models)
    ckpt = folder / "checkpoints" / "00000010"
    _write_model(ckpt)
    with pytest.raises(NotFoundError, match="incomplete"):
        check_model_path(f"trained/{RUN}/checkpoints/00000010", models)


def test_symlink_out_of_the_volume_refused(models: FolderVolume, tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "model"
    _write_model(outside)
    (models.root / "trained").mkdir(parents=True)
    os.symlink(outside, models.root / "trained" / RUN)
    with pytest.raises(UsageError, match="outside the volume"):
        check_model_path(f"trained/{RUN}", models)


def test_symlinked_weights_file_refused(models: FolderVolume, tmp_path: Path) -> None:
    folder = models.root / "trained" / RUN
    _write_model(folder)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"secret")
    (folder / "adapter_model.safetensors").unlink()
    os.symlink(secret, folder / "adapter_model.safetensors")
    with pytest.raises(UsageError, match="outside"):
        ref = check_model_path(f"trained/{RUN}", models)
        local_model_dir(ref, models.root)


def test_listing_and_legacy_default(models: FolderVolume) -> None:
    _write_model(models.root / "trained" / RUN, created=10.0)
    _write_model(models.root / "trained" / OTHER, created=20.0)
    _write_model(models.root / "trained" / "run-20261130-140000-ffffff", preset="4b")
    (models.root / "trained" / "run-20261130-150000-eeeeee").mkdir()  # still training: skipped
    (models.root / "trained" / "not-a-run").mkdir()
    listed = list_trained_models(models)
    assert [m.run_id for m in listed] == ["run-20261130-140000-ffffff", OTHER, RUN]
    assert listed[1].preset == "tiny" and listed[1].dataset_id == "demo" and listed[1].size_bytes > 100
    assert default_model_for_preset(models, "tiny").path == f"trained/{OTHER}"
    assert default_model_for_preset(models, "4b").run_id == "run-20261130-140000-ffffff"
    with pytest.raises(NotFoundError, match="12b"):
        default_model_for_preset(models, "12b")


@pytest.mark.slow
def test_cli_refuses_hostile_path_with_exit_2(cli_env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", "infer", "--model-path", "trained/../../etc/passwd", "--prompt", "x"],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "contains '..'" in proc.stderr


@pytest.mark.slow
def test_cli_models_lists_json(cli_env: dict[str, str], trainkit_home: Path) -> None:
    _write_model(trainkit_home / "volumes" / "trainkit-models" / "trained" / RUN)
    proc = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", "models", "--json"],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert [m["model_path"] for m in json.loads(proc.stdout)["models"]] == [f"trained/{RUN}"]


def test_default_model_for_twin_preset(models: FolderVolume) -> None:
    """`train --model-size tiny-gemma3mm` is accepted, so `infer --model-size tiny-gemma3mm` must find it."""
    _write_model(models.root / "trained" / RUN, created=10.0, preset="tiny-gemma3mm")
    _write_model(models.root / "trained" / OTHER, created=20.0)
    assert default_model_for_preset(models, "tiny-gemma3mm").path == f"trained/{RUN}"
    with pytest.raises(UsageError, match="unknown model size 'tiny-nope'"):
        default_model_for_preset(models, "tiny-nope")
