"""One Python environment per image of the app: exactly the packages the image declares.

A Modal image is Debian slim + the image's pip packages + the modal client (Modal
installs it into every image it builds). Here each image becomes a venv holding the
same: the image's packages and ``modal`` at the client's version, no trainkit
distribution. Two things cannot be the same on these machines, and are swapped:

- ``torch``: the images pin a CUDA build; the CPU wheel ``torch==2.13.0`` that lies on
  these machines' disks stands in (only pip finds it, so pip installs it; the rest
  comes from uv when it is installed, from pip otherwise);
- GPU-only wheels (Unsloth and unsloth_zoo, xformers, triton, the CUDA torchvision and
  torchaudio, NVIDIA's CUDA libraries) are left out: they do not install or import
  without a GPU (Unsloth's 2.9 GB CPU install is the `unsloth` nox session's business).

llama.cpp (xllamacpp, the infer image's) is a prebuilt CPU wheel and is installed as is.

Nothing is dropped silently: a package left out of a venv must be in the image's lock,
which `nox -s modal_resolve` resolves as a whole with everything else the image has
(`plan` refuses anything else). `left_out` lists them, and `deploy_sim` prints them as
"only resolved". Packages the image does not pin are resolved with `constraints/ci.txt`
(the project's tested CPU stack); the image's own pins win over it. Venvs are cached by
their exact contents under `.nox/_container_sim/` (or ``CONTAINER_SIM_CACHE``), built
aside and renamed into place, so a second run starts in seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CONSTRAINTS = REPO / "constraints" / "ci.txt"
#: The CPU wheel standing in for the images' CUDA torch.
CPU_TORCH = "torch==2.13.0"
#: Wheels that need a GPU (or are CUDA builds); never installed here.
GPU_ONLY = {
    "unsloth", "unsloth-zoo", "xformers", "triton", "torchvision", "torchaudio", "flash-attn",
    # Unsloth's own GPU kernels (torchao's CUDA extension, the Triton cross-entropy).
    "torchao", "cut-cross-entropy",
}  # fmt: skip
#: NVIDIA's CUDA libraries that the CUDA torch pulls (nvidia-cublas, cuda-toolkit, ...).
GPU_ONLY_PREFIXES = ("nvidia-", "cuda-")


class DroppedSilently(RuntimeError):
    """A package of an image that the simulation would neither install nor have resolved."""


def gpu_only(name: str) -> bool:
    return name in GPU_ONLY or name.startswith(GPU_ONLY_PREFIXES)


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def req_name(requirement: str) -> str:
    match = _NAME.match(requirement)
    assert match, requirement
    return _norm(match.group(1))


@dataclass(frozen=True)
class ImageEnv:
    """A built venv standing for one image."""

    image: str
    python: Path
    installed: tuple[str, ...]
    left_out: tuple[str, ...]


def plan(packages: tuple[str, ...] | list[str], resolved: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """(what to install, what is left out and why) for an image's declared packages.

    `resolved` is the image's lock, which the resolution check resolves as a whole: a
    package that cannot be installed here is left out only if it is there, so it is
    still resolved with everything else (`DroppedSilently` otherwise).
    """
    from packaging.requirements import Requirement

    locked = {str(Requirement(r)) for r in resolved}
    install: list[str] = []
    left_out: list[str] = []
    for requirement in packages:
        requirement = str(Requirement(requirement))  # one spelling per requirement (the cache key)
        name = req_name(requirement)
        if not gpu_only(name) and name != "torch":
            install.append(requirement)
            continue
        if requirement not in locked:
            raise DroppedSilently(
                f"{requirement} cannot be installed in the simulation and is not in the image's lock, "
                "so nothing would resolve it: lock the image (nox -s modal_locks)"
            )
        if name == "torch":
            install.append(CPU_TORCH)
            left_out.append(f"{requirement} (CUDA build; {CPU_TORCH} CPU stands in; resolved)")
        else:
            left_out.append(f"{requirement} (GPU-only; resolved)")
    install.append(f"modal=={version('modal')}")  # Modal adds its client to every image
    return install, left_out


def _constraints(install: list[str]) -> str:
    """constraints/ci.txt without the packages the image pins itself (its pins win)."""
    pinned = {req_name(r) for r in install if "==" in r}
    lines = []
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and req_name(line) not in pinned:
            lines.append(line.strip())
    return "\n".join(lines) + "\n"


def _interpreter(python_version: str) -> str:
    """The interpreter of the image's Python; the simulation refuses to stand another in."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == python_version:
        return sys.executable
    found = shutil.which(f"python{python_version}")
    if found is None:
        raise RuntimeError(f"the image runs Python {python_version}; no python{python_version} on PATH")
    return found


def _install_commands(python: Path, constraints: Path, install: list[str]) -> list[list[str]]:
    """pip for the CPU torch (only pip finds its file), then uv for everything else when it is there.

    uv installs the rest in seconds where pip takes minutes (the stacks are ~100
    packages); torch, already installed, satisfies the pin and is kept. Without uv,
    pip installs everything. Either way the venv holds the same distributions.
    """
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-c", str(constraints)]
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        return [[*pip, *install]]
    torch = [r for r in install if req_name(r) == "torch"]
    # --compile-bytecode: as pip does, so a container's imports do not compile every module.
    uv_install = [uv, "pip", "install", "--compile-bytecode", "--python", str(python), "-c", str(constraints), *install]
    return [[*pip, *torch], uv_install] if torch else [uv_install]


def cache_root() -> Path:
    return Path(os.environ.get("CONTAINER_SIM_CACHE") or REPO / ".nox" / "_container_sim")


def build_env(
    image: str,
    python_version: str,
    packages: tuple[str, ...] | list[str],
    resolved: tuple[str, ...] | list[str],
    say: Callable[[str], None] = print,
) -> ImageEnv:
    """The venv of one image (cached by content); the installers' output stays in `<venv>/pip.log`.

    A first build takes minutes (the training image's stack), so `say` gets a line
    before and after it: a silent pause that long looks like a hang.
    """
    install, left_out = plan(packages, resolved)
    constraints = _constraints(install)
    key = hashlib.sha256(json.dumps([python_version, sorted(install), constraints]).encode()).hexdigest()[:16]
    folder = cache_root() / f"py{python_version}-{key}"
    python = folder / "bin" / "python"
    if not python.is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        building = folder.with_name(f"{folder.name}.building-{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        subprocess.run([_interpreter(python_version), "-m", "venv", str(building)], check=True)
        (building / "constraints.txt").write_text(constraints)
        (building / "requirements.json").write_text(json.dumps({"install": install, "left_out": left_out}, indent=1))
        say(
            f"container_sim: building the {image} image's environment, once per content "
            f"({' '.join(install)}; log {folder.name}/pip.log)"
        )
        started = time.monotonic()
        failed = None
        with open(building / "pip.log", "w") as log:
            for command in _install_commands(building / "bin" / "python", building / "constraints.txt", install):
                if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
                    failed = "pip" if command[1:3] == ["-m", "pip"] else Path(command[0]).name
                    break
        if failed:
            tail = (building / "pip.log").read_text()[-3000:]
            raise RuntimeError(f"{failed} could not build the {image} image's environment:\n{tail}")
        say(f"container_sim: the {image} image's environment is built ({time.monotonic() - started:.0f} s)")
        try:
            building.rename(folder)
        except OSError:  # another run finished the same venv first
            shutil.rmtree(building, ignore_errors=True)
    return ImageEnv(image, python, tuple(install), tuple(left_out))
