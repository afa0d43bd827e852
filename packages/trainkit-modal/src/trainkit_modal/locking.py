"""Each Modal image's whole set of packages, resolved together and locked, checked offline.

Modal builds an image layer by layer, and each `uv_pip_install` layer resolves against
the index it is given and nothing else (modal 1.6.4, `_image.py`). An image whose
layers were never resolved together can be unsatisfiable, and nobody learns it before
`trainkit app deploy` builds it: Unsloth's `cu130-torch2121` extra requires
`torchaudio==2.11.0+cu130`, which only PyTorch's CUDA index serves, so a layer resolved
from PyPI alone fails.

So each image installs a lock (`locks/<image>.txt` beside `images.toml`): every package
it needs, resolved in one pass for the images' Python on linux x86_64. The image
installs the lock with ``--no-deps`` in two layers, the CUDA wheels from their index
and everything else from PyPI; what makes that safe is that the resolver has checked
the whole lock at once. PyTorch's CUDA index cannot be reached from the machines that
test trainkit, so its wheels are stand-ins here (`locks/cuda-wheels.toml`: the real
names, versions with their local tags, and dependency metadata, in tiny wheels with no
code), given to the resolver with ``--find-links``.

`python -m trainkit_modal.lock_images` (`nox -s modal_locks`) regenerates the locks
(uv and PyPI needed); `--check` resolves them again and fails naming the requirement
that cannot be met.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainkit_core.errors import UsageError

#: The locks and the CUDA wheels' stand-in metadata, beside `images.toml`.
LOCKS_DIR = Path(__file__).with_name("locks")
CUDA_WHEELS_FILE = LOCKS_DIR / "cuda-wheels.toml"
#: The platform every image runs on (Modal's containers: Debian, glibc 2.36, x86_64).
PLATFORM = "x86_64-manylinux_2_28"
#: The command that regenerates the locks (printed in errors; the docs name it too).
REGENERATE = "nox -s modal_locks"

#: Packages resolved with an image but installed in none, on purpose: name -> why.
LEFT_OUT: dict[str, str] = {
    "xformers": (
        "PyPI's xformers 0.0.35 (the only version Unsloth's cu130-torch2121 extra allows) is built for torch "
        "2.10.0+cu128 (its cpp_lib.json), not the image's 2.12.1+cu130; without it Unsloth uses PyTorch's "
        "attention (unsloth/models/llama.py: HAS_XFORMERS = xformers is not None)"
    ),
}

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def name_of(requirement: str) -> str:
    match = _NAME.match(requirement)
    if match is None:
        raise UsageError(f"not a requirement: {requirement!r}")
    return canonical(match.group(1))


class UnresolvableImage(UsageError):
    """An image's packages cannot be installed together; the message names the requirement."""


# --------------------------------------------------------------------------- stand-ins


@dataclass(frozen=True)
class StandIn:
    """A wheel of PyTorch's CUDA index, as the resolver sees it: name, version, metadata."""

    name: str
    version: str
    requires_python: str
    requires: tuple[str, ...]

    def write(self, folder: Path) -> Path:
        """A wheel with this metadata and no code (enough for a resolver, useless to install)."""
        dist = f"{self.name.replace('-', '_')}-{self.version}"
        tag = "cp311-cp311-manylinux_2_28_x86_64"
        metadata = [f"Metadata-Version: 2.1\nName: {self.name}\nVersion: {self.version}\n"]
        if self.requires_python:
            metadata.append(f"Requires-Python: {self.requires_python}\n")
        metadata += [f"Requires-Dist: {r}\n" for r in self.requires]
        info = f"{dist}.dist-info"
        path = folder / f"{dist}-{tag}.whl"
        with zipfile.ZipFile(path, "w") as wheel:
            wheel.writestr(f"{info}/METADATA", "".join(metadata))
            wheel.writestr(
                f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: trainkit\nRoot-Is-Purelib: false\nTag: {tag}\n"
            )
            wheel.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
        return path


def load_stand_ins(path: Path = CUDA_WHEELS_FILE) -> tuple[StandIn, ...]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    data = tomllib.loads(path.read_text())
    return tuple(
        StandIn(str(w["name"]), str(w["version"]), str(w.get("requires_python", "")), tuple(w.get("requires", ())))
        for w in data["wheel"]
    )


def write_stand_ins(folder: Path) -> Path:
    """The stand-in wheels of every CUDA wheel in `folder` (for ``--find-links``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for stand_in in load_stand_ins():
        stand_in.write(folder)
    return folder


def cuda_names() -> frozenset[str]:
    """The packages that come from PyTorch's CUDA index, not PyPI."""
    return frozenset(canonical(w.name) for w in load_stand_ins())


# --------------------------------------------------------------------------- locks


@dataclass(frozen=True)
class Lock:
    """One image's lock: what was asked for, and every package resolved for it (``name==version``)."""

    image: str
    python: str
    requested: tuple[str, ...]
    pins: tuple[str, ...]

    @property
    def left_out(self) -> tuple[str, ...]:
        """Pins resolved with the image but not installed in it (`LEFT_OUT`)."""
        return tuple(p for p in self.pins if name_of(p) in LEFT_OUT)

    @property
    def cuda_pins(self) -> tuple[str, ...]:
        """Pins installed from PyTorch's CUDA index (the image's first layer)."""
        cuda = cuda_names()
        return tuple(p for p in self.pins if name_of(p) in cuda)

    @property
    def pypi_pins(self) -> tuple[str, ...]:
        """Pins installed from PyPI (the image's second layer)."""
        skip = {*self.cuda_pins, *self.left_out}
        return tuple(p for p in self.pins if p not in skip)

    def version_of(self, name: str) -> str | None:
        for pin in self.pins:
            if name_of(pin) == canonical(name):
                return pin.split("==", 1)[1]
        return None

    def text(self) -> str:
        lines = [
            f"# The {self.image} image of trainkit's Modal app: every package it needs, resolved together",
            f"# for Python {self.python} on {PLATFORM}. Generated by `{REGENERATE}`; do not edit.",
            f"# The CUDA wheels ({', '.join(sorted(cuda_names()))}) come from images.toml's torch_index,",
            "# the rest from PyPI; both layers install with --no-deps.",
            *(f"# requested: {r}" for r in self.requested),
        ]
        for pin in self.pins:
            name = name_of(pin)
            lines.append(f"# left out: {pin}  ({LEFT_OUT[name]})" if name in LEFT_OUT else pin)
        return "\n".join(lines) + "\n"

    @staticmethod
    def parse(image: str, text: str) -> Lock:
        python, requested, pins = "", [], []
        for line in text.splitlines():
            if line.startswith("# requested: "):
                requested.append(line.removeprefix("# requested: "))
            elif line.startswith("# left out: "):
                pins.append(line.removeprefix("# left out: ").split()[0])
            elif found := re.match(r"^# for Python (\S+) on ", line):
                python = found.group(1)
            elif line.strip() and not line.startswith("#"):
                pins.append(line.strip())
        return Lock(image, python, tuple(requested), tuple(pins))


def lock_path(image: str) -> Path:
    return LOCKS_DIR / f"{image}.txt"


def read_lock(image: str) -> Lock:
    path = lock_path(image)
    if not path.is_file():
        raise UsageError(f"the {image} image has no lock ({path})", hint=f"generate the locks: `{REGENERATE}`")
    return Lock.parse(image, path.read_text())


def unmet(lock: Lock, requested: Sequence[str]) -> list[str]:
    """The requirements of `requested` that the lock's pins do not satisfy (a stale lock)."""
    from packaging.requirements import Requirement

    missing = []
    for text in requested:
        req = Requirement(text)
        version = lock.version_of(req.name)
        if version is None or not req.specifier.contains(version, prereleases=True):
            missing.append(text)
    return missing


# --------------------------------------------------------------------------- the resolver


def uv() -> str:
    """The uv executable (on PATH, or the `uv` package's)."""
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]
    except ImportError:
        raise UsageError("resolving the Modal images needs uv", hint="pip install uv") from None
    return str(find_uv_bin())


def _explain(image: str, output: str) -> UnresolvableImage:
    """The resolver's own explanation, led by the requirement nobody can satisfy."""
    found = re.search(r"there is no version of (\S+?)(?: and|,| we|$)", " ".join(output.split()))
    culprit = found.group(1) if found else "(see the resolver's output)"
    text = output.strip()[-3000:]
    return UnresolvableImage(
        f"the {image} image cannot be installed: no index it uses has {culprit}\n{text}",
        hint=f"fix images.toml, then regenerate the locks: `{REGENERATE}`",
    )


def compile_pins(image: str, requirements: Sequence[str], python: str, find_links: Path, workdir: Path) -> list[str]:
    """Resolve `requirements` together (PyPI, plus the CUDA stand-ins) for the images' platform: ``name==version``."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / f"{image}.in"
    source.write_text("\n".join(requirements) + "\n")
    done = subprocess.run(
        [uv(), "pip", "compile", str(source), "--find-links", str(find_links), "--python-version", python,
         "--python-platform", PLATFORM, "--no-header", "--no-annotate", "--quiet"],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise _explain(image, done.stderr + done.stdout)
    return [line.strip() for line in done.stdout.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def check_layers(image: str, layers: Sequence[tuple[Sequence[str], str | None]], python: str, workdir: Path) -> None:
    """Resolve an image built from unlocked layers as Modal builds it: each layer alone, on top of the earlier ones.

    A layer with an index (PyTorch's) resolves against the CUDA stand-ins; the stand-ins
    it picks are then installed (no code, no dependencies) into a scratch environment
    of the images' Python, and a layer without an index resolves from PyPI alone beside
    what is installed, as ``uv pip install`` does in the image.
    """
    stand_ins = write_stand_ins(workdir / "cuda-wheels")
    env = workdir / "image-env"
    subprocess.run([uv(), "venv", "--quiet", "--python", python, str(env)], check=True, capture_output=True)
    target = ["--python", str(env / "bin" / "python")]
    for packages, index in layers:
        if index is not None:
            picked = compile_pins(image, packages, python, stand_ins, workdir)
            wheels = [w for w in stand_ins.glob("*.whl") if f"{w.name.split('-')[0]}=={w.name.split('-')[1]}" in picked]
            subprocess.run([uv(), "pip", "install", "--quiet", *target, "--no-deps", *map(str, wheels)], check=True)
            continue
        done = subprocess.run([uv(), "pip", "install", "--dry-run", *target, *packages], capture_output=True, text=True)
        if done.returncode != 0:
            raise _explain(image, done.stderr + done.stdout)


def check_lock(lock: Lock, workdir: Path) -> None:
    """The lock resolves as a whole, and nothing it needs is missing from it.

    Its pins are resolved again together; the result must be exactly the lock (a pin
    that pulls a package the lock lacks would be missing from an image installed with
    ``--no-deps``).
    """
    stand_ins = write_stand_ins(workdir / "cuda-wheels")
    resolved = compile_pins(lock.image, lock.pins, lock.python, stand_ins, workdir)
    extra = sorted(set(resolved) - set(lock.pins))
    if extra:
        raise UnresolvableImage(
            f"the {lock.image} image's lock misses what its pins need: {', '.join(extra)}",
            hint=f"regenerate the locks: `{REGENERATE}`",
        )


def generate(images: dict[str, tuple[str, ...]], python: str, workdir: Path) -> dict[str, Lock]:
    """A lock per image from what each asks for (`trainkit_modal.spec.requested_packages`)."""
    stand_ins = write_stand_ins(workdir / "cuda-wheels")
    return {
        image: Lock(image, python, tuple(requested), tuple(compile_pins(image, requested, python, stand_ins, workdir)))
        for image, requested in images.items()
    }
