"""Volume reloads in a container: only what a job reads, and a failed one recovered.

Modal refuses `Volume.reload()` while the container holds files of the volume open;
a warm inference container memory-maps its models' weights. The fake's `reload` is
as strict (it reads /proc/self/fd and /proc/self/maps).
"""

from __future__ import annotations

import logging
import mmap
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from trainkit_core.settings import Settings
from trainkit_modal import spec
from trainkit_modal.container import WarmInference


def _ops(fake_modal: ModuleType, volume: str) -> list[str]:
    lines = (fake_modal._root() / "volume-ops.log").read_text().splitlines()
    return [op for _, op, name in (line.split() for line in lines) if name == volume]


def test_a_failed_reload_drops_the_cached_models_and_reloads(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings.from_env()
    models = fake_modal.Volume.from_name(settings.volumes.name_for("models"), create_if_missing=True)
    monkeypatch.setitem(spec.MOUNT_PATHS, "models", str(models.root))
    monkeypatch.setitem(spec.MOUNT_PATHS, "hf-cache", str(tmp_path / "hf"))
    weights = models.root / "trained" / "run-x" / "adapter_model.safetensors"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"\0" * 4096)

    warm = WarmInference(sdk=fake_modal)
    # A loaded model maps its weights from the volume, as safetensors does.
    with open(weights, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    warm.cache._bases[("base", "cpu", False)] = SimpleNamespace(model=mapped, adapters={})  # type: ignore[assignment]
    del mapped
    with pytest.raises(RuntimeError, match="open files preventing the operation"):
        models.reload()  # the fake refuses, as Modal does

    with caplog.at_level(logging.WARNING, logger="trainkit_modal.container"):
        warm.reload_models()
    assert warm.cache.loaded() == []  # dropped: the next request loads again
    assert _ops(fake_modal, models.name) == ["reload-refused", "reload-refused", "reload"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("reload failed" in m and "open files" in m for m in messages), messages
    assert any("dropping cached models" in m for m in messages), messages


def test_a_reload_that_cannot_recover_is_logged_as_an_error(
    fake_modal: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    from trainkit_modal.container import reload_volumes

    def refuse(kind: str) -> None:
        raise RuntimeError("there are open files preventing the operation")

    with caplog.at_level(logging.WARNING, logger="trainkit_modal.container"):
        reload_volumes(SimpleNamespace(reload=refuse), ("models",), recover=lambda: None)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and "stale view" in errors[0]
