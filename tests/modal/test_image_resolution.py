"""Every Modal image resolves as a whole against PyPI, with stand-ins for PyTorch's CUDA index.

Runs in its own default nox session, `modal_resolve` (marker `pypi_resolve`): it needs
uv and PyPI, nothing else (PyTorch's CUDA index cannot be reached here; its wheels are
the stand-ins of `trainkit_modal/locks/cuda-wheels.toml`). Without PyPI the tests skip,
but under ``CI=true`` they fail: CI must never pass a resolution it did not run.
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.pypi_resolve

PYPI_PROBE = "https://pypi.org/simple/pip/"


@pytest.fixture(scope="module", autouse=True)
def _pypi() -> None:
    try:
        urllib.request.urlopen(PYPI_PROBE, timeout=20).close()
    except OSError as exc:
        message = f"PyPI is not reachable ({exc}): the images' resolution cannot be checked"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _settings():  # type: ignore[no-untyped-def]
    from trainkit_core.settings import Settings

    return Settings.from_env()


IMAGES = ["train", "infer", "web"]


@pytest.mark.parametrize("image", IMAGES)
def test_each_lock_resolves_as_a_whole(image: str, tmp_path: Path) -> None:
    """The lock's pins, resolved again together, give exactly the lock: the image installs it with --no-deps."""
    from trainkit_modal.locking import check_lock, read_lock

    check_lock(read_lock(image), tmp_path)


@pytest.mark.parametrize("image", IMAGES)
def test_each_lock_is_what_the_image_asks_for(image: str) -> None:
    """A lock that no longer satisfies images.toml or the packages' requirements is stale (deploy refuses it)."""
    from trainkit_modal.locking import read_lock, unmet
    from trainkit_modal.spec import load_stack, requested_packages

    stack = load_stack()
    lock = read_lock(image)
    assert lock.python == stack.python
    assert list(lock.requested) == list(requested_packages(stack)[image]), "regenerate: nox -s modal_locks"
    assert unmet(lock, lock.requested) == []


def test_the_gpu_images_lock_the_cuda_wheels_of_the_index(tmp_path: Path) -> None:
    """torchaudio (needed only through Unsloth's extra) is locked, and comes from the CUDA index layer."""
    from trainkit_modal.spec import build_images

    images = build_images(_settings())
    train = images["train"]
    assert "torchaudio==2.11.0+cu130" in train.torch_packages
    assert "torch==2.12.1+cu130" in train.torch_packages
    assert not any("+cu" in p for p in train.packages)
    assert train.install_options == "--no-deps"
    assert [p.split("==")[0] for p in train.resolved_only] == ["xformers"]
    assert images["web"].torch_packages == () and images["web"].torch_index is None
    # The export job's image: llama.cpp (xllamacpp, a prebuilt CPU wheel) comes from PyPI, not the CUDA layer.
    assert {"gguf==0.19.0", "xllamacpp==2026.10.11549"} <= set(images["infer"].packages)


def test_todays_layers_were_unsatisfiable(tmp_path: Path) -> None:
    """What an earlier review found, kept as proof that the check can fail: the train image's asks, layered as before
    (torch from its index, then the rest from PyPI alone), cannot be resolved, and the error names why."""
    from trainkit_modal.locking import UnresolvableImage, check_layers
    from trainkit_modal.spec import load_stack, requested_packages

    stack = load_stack()
    rest = [p for p in requested_packages(stack)["train"] if p not in stack.torch]
    with pytest.raises(UnresolvableImage, match=r"no index it uses has torchaudio==2\.11\.0\+cu130"):
        check_layers("train", [(stack.torch, stack.torch_index), (rest, None)], stack.python, tmp_path)


def test_a_lock_missing_a_dependency_is_refused(tmp_path: Path) -> None:
    """A lock without a package its pins need would leave it out of a --no-deps image: refused, named."""
    from dataclasses import replace

    from trainkit_modal.locking import UnresolvableImage, check_lock, read_lock

    lock = read_lock("web")
    pins = tuple(p for p in lock.pins if not p.startswith("pydantic-core=="))
    assert len(pins) == len(lock.pins) - 1
    with pytest.raises(UnresolvableImage, match="misses what its pins need: pydantic-core=="):
        check_lock(replace(lock, pins=pins), tmp_path)
