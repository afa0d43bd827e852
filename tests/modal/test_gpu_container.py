"""A Modal container given a GPU that its torch cannot use stops the job at once.

The container's system files (the NVIDIA device node, the driver's version) are laid out
in a folder of the test's own, torch's CUDA is the train image's (13.0), and
`torch.cuda.is_available()` is the real one (False here, as on a host whose driver is
older than CUDA 13.0 needs). The job's call record carries the reason.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from trainkit_core.errors import JobError
from trainkit_core.settings import Settings
from trainkit_core.training import gpu
from trainkit_modal import container
from trainkit_modal.kv import ModalKV
from trainkit_modal.records import CALLS_NAMESPACE, ended_key

#: torch decides whether a GPU is usable: these run in the ml session.
pytestmark = pytest.mark.ml


@pytest.fixture
def old_driver_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    root = tmp_path / "system"
    (root / "dev").mkdir(parents=True)
    (root / "dev" / "nvidia0").touch()
    (root / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (root / "proc" / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024\n"
    )
    monkeypatch.setattr(gpu, "SYSTEM_ROOT", root)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.mark.parametrize("job", ["eval", "export", "infer"])
def test_a_gpu_job_on_a_gpu_torch_cannot_use_fails_at_once_naming_the_driver(
    old_driver_host: None, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch, job: str
) -> None:
    monkeypatch.setenv("FAKE_MODAL_CALL_ID", f"fc-gpu{job}")
    never = pytest.fail  # the job itself must not start
    with pytest.raises(JobError, match=r"NVIDIA driver >= 580\.65\.06 \(CUDA 13\.0\).*550\.90\.07"):
        container.run_job(job, {}, sdk=fake_modal, call=lambda ctx, **kw: never("the job ran"))
    ended = ModalKV.for_settings(fake_modal, Settings.from_env(), CALLS_NAMESPACE).get(ended_key(f"fc-gpu{job}"))
    assert ended["state"] == "failed" and "580.65.06" in ended["error"]


def test_a_light_job_is_not_checked(
    old_driver_host: None, fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODAL_CALL_ID", "fc-ping1")
    assert container.run_job("ping", {}, sdk=fake_modal, call=lambda ctx, **kw: {"ok": True}) == {"ok": True}
