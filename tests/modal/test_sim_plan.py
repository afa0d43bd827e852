"""The container simulation drops nothing silently (`container_sim/envs.py`'s `plan`).

A package that cannot be installed on these machines (a CUDA build, a GPU kernel) is
left out of a simulated container only when the image's lock holds it, since the lock is
what `nox -s modal_resolve` resolves as a whole.
"""

from __future__ import annotations

import pytest
from container_sim.envs import CPU_TORCH, DroppedSilently, plan

from trainkit_modal.locking import read_lock
from trainkit_modal.spec import build_images


def test_a_package_that_cannot_be_installed_is_still_resolved() -> None:
    lock = ("torch==2.12.1+cu130", "torchaudio==2.11.0+cu130", "nvidia-nccl-cu13==2.29.7", "numpy==2.3.5")
    install, left_out = plan(lock, resolved=lock)
    assert CPU_TORCH in install and "numpy==2.3.5" in install
    assert not any(p.startswith(("torchaudio", "nvidia-", "torch==2.12")) for p in install)
    assert left_out == [
        f"torch==2.12.1+cu130 (CUDA build; {CPU_TORCH} CPU stands in; resolved)",
        "torchaudio==2.11.0+cu130 (GPU-only; resolved)",
        "nvidia-nccl-cu13==2.29.7 (GPU-only; resolved)",
    ]


def test_a_package_neither_installed_nor_resolved_is_refused() -> None:
    with pytest.raises(
        DroppedSilently, match=r"torchaudio==2\.11\.0\+cu130 cannot be installed .* not in the image's lock"
    ):
        plan(["torchaudio==2.11.0+cu130", "numpy==2.3.5"], resolved=["numpy==2.3.5"])


def test_every_real_image_is_installed_or_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's images: whatever the simulation leaves out is in the lock that modal_resolve checks."""
    from trainkit_core.settings import Settings

    for key in ("TRAINKIT_API_TOKEN", "TRAINKIT_GPU"):
        monkeypatch.delenv(key, raising=False)
    for name, image in build_images(Settings.from_env()).items():
        lock = read_lock(name)
        install, left_out = plan(image.all_packages, resolved=lock.pins)
        named = {entry.split(" ")[0] for entry in left_out}
        for package in image.all_packages:
            assert (package in install) != (package in named), (name, package)
        assert named <= set(lock.pins)
        assert set(image.resolved_only) <= set(lock.pins)
        if name == "train":
            assert "torchaudio==2.11.0+cu130" in named and "xformers==0.0.35" in image.resolved_only
        if name == "infer":  # the export job's image: the GGUF writer and llama.cpp (a prebuilt wheel) both run
            assert {"gguf==0.19.0", "xllamacpp==2026.10.11549"} <= set(install)
