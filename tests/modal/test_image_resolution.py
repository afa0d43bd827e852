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


@pytest.mark.parametrize("image", ["train", "infer", "web"])
def test_image_resolves_as_modal_builds_it(image: str, tmp_path: Path) -> None:
    """Each layer alone, on top of the earlier ones, as Modal's `uv_pip_install` layers resolve."""
    from trainkit_modal.locking import check_layers
    from trainkit_modal.spec import build_images

    spec = build_images(_settings())[image]
    layers = []
    if spec.torch_packages:
        layers.append((spec.torch_packages, spec.torch_index))
    layers.append((spec.packages, None))
    check_layers(image, layers, spec.python_version, tmp_path)
