"""A train job on a machine given a GPU that its torch cannot use fails at once.

This machine has no GPU: the system files the check reads (the NVIDIA device node, the
driver's version) are laid out in a folder of the test's own, and torch's CUDA version is
the one Modal's train image has (13.0). `torch.cuda.is_available()` is the real one (False
here), as it is on a GPU host whose driver is too old for CUDA 13.0.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_core.errors import JobError
from trainkit_core.ids import new_run_id
from trainkit_core.local.plugin import job_context
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import Settings
from trainkit_core.training import gpu, job

#: torch decides whether a GPU is usable: these run in the ml session.
pytestmark = pytest.mark.ml

OLD_DRIVER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"


def _system(root: Path, *, device: bool = True, driver: str | None = OLD_DRIVER) -> Path:
    if device:
        (root / "dev").mkdir(parents=True)
        (root / "dev" / "nvidiactl").touch()
    if driver is not None:
        (root / "proc" / "driver" / "nvidia").mkdir(parents=True)
        (root / "proc" / "driver" / "nvidia" / "version").write_text(driver)
    return root


@pytest.fixture
def cuda13(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    assert not torch.cuda.is_available()  # the real answer, as on a host whose driver is too old
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_a_train_job_given_a_gpu_torch_cannot_use_fails_at_once_naming_the_driver(
    cuda13: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu, "SYSTEM_ROOT", _system(tmp_path / "system"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    ctx = job_context(Settings.from_env(), "lc-test")
    run = TrainingRun(id=new_run_id(), created_at=time.time(), config={"dataset": "demo", "model_size": "tiny"})
    run.attach(RunStore.for_job(ctx)).save()
    with pytest.raises(JobError) as caught:
        job.train(ctx, run.id)
    message = caught.value.message
    assert "NVIDIA driver >= 580.65.06 (CUDA 13.0)" in message and "535.104.05" in message
    assert "CUDA_VISIBLE_DEVICES" in (caught.value.hint or "")
    stored = run.reload()
    assert stored.status == "failed" and "580.65.06" in (stored.error_message or "")
    assert stored.step == 0


@pytest.mark.parametrize(
    ("device", "hidden", "driver", "fails"),
    [
        (False, None, None, False),  # no GPU given: a CPU run, as before
        (True, "", OLD_DRIVER, False),  # the GPUs hidden on purpose
        (True, "-1", OLD_DRIVER, False),
        (True, None, None, True),  # no driver version to read: still refused
        (True, "0", OLD_DRIVER, True),
    ],
)
def test_the_check_refuses_only_a_gpu_given_and_not_usable(
    cuda13: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    device: bool,
    hidden: str | None,
    driver: Any,
    fails: bool,
) -> None:
    root = _system(tmp_path / "system", device=device, driver=driver)
    if hidden is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
    if fails:
        with pytest.raises(JobError, match=r"580\.65\.06") as caught:
            gpu.check_gpu_visible(root)
        assert ("not readable" in caught.value.message) == (driver is None)
    else:
        gpu.check_gpu_visible(root)


def test_what_each_torch_needs() -> None:
    assert gpu.needed_driver("12.8") == "NVIDIA driver >= 570.26 (CUDA 12.8)"
    assert gpu.needed_driver("13.0") == "NVIDIA driver >= 580.65.06 (CUDA 13.0)"
    assert gpu.needed_driver("14.1") == "an NVIDIA driver that supports CUDA 14.1"
    assert "built for the CPU only" in gpu.needed_driver(None)


def test_the_driver_version_is_read_from_the_kernel_modules_line(tmp_path: Path) -> None:
    assert gpu.driver_version(_system(tmp_path / "a")) == "535.104.05"
    open_kernel = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"
    assert gpu.driver_version(_system(tmp_path / "b", driver=open_kernel)) == "580.95.05"
    assert gpu.driver_version(_system(tmp_path / "c", driver=None)) is None
