#!/usr/bin/env python3
"""Download the wheels the GPU check needs on a lent device into an ignored folder (default ``.whl/``).

Why: the device machine has no network. It has torch, transformers, peft and
accelerate, but not trl, datasets, bitsandbytes, Unsloth, unsloth_zoo, nor trainkit-core's
own light dependencies (pydantic, pydantic-settings); those travel as wheels with the
working tree, 64 MiB a call in all. Unsloth's wheel (28.6 MB) carries its web "studio"
and CLI, and bitsandbytes' (43.1 MB) a library for every CUDA and ROCm version; the
check needs neither, so both are trimmed here (files dropped, their RECORD lines with
them; nothing else changed) to fit beside the rest. The list, the sizes and the
procedure are in docs/developer/records/gpu-check.md.

Versions: Unsloth 2026.10.9 (the version installed and run here, see FACTS), with what
it pins: trl <= 1.15.0 and datasets < 5 (constraints/ci.txt pins trl 1.16.0 and
datasets 5.2.0 for the CPU CI, which Unsloth refuses); the device's transformers is
5.17.0, Unsloth's upper bound. pydantic's stack as in the CI venv.

Usage: ``python3 scripts/gpu_wheels.py [--dest .whl] [--no-unsloth] [--no-bitsandbytes]``;
prints the list with sizes and the total. Needs pip and PyPI.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The device: Python 3.12 (CPython) on x86-64 Linux, CUDA 13.0 torch.
PLATFORM_ARGS = [
    "--only-binary=:all:",
    "--no-deps",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    *[f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64")],
    *[f"--platform={p}" for p in ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "any")],
]

#: (distribution, version, group). Groups: core (trainkit-core on the device), train
#: (the hf backend), gpu (Unsloth and 4-bit).
WHEELS: list[tuple[str, str, str]] = [
    ("pydantic", "2.14.4", "core"),
    ("pydantic-core", "2.50.5", "core"),
    ("pydantic-settings", "2.16.3", "core"),
    ("annotated-types", "0.8.0", "core"),
    ("typing-inspection", "0.4.5", "core"),
    ("python-dotenv", "1.2.4", "core"),
    ("peft", "0.21.2", "train"),  # the device has a peft of unknown version; this one is CI's and Unsloth's here
    ("trl", "1.15.0", "train"),
    ("datasets", "4.8.5", "train"),
    ("dill", "0.4.1", "train"),
    ("multiprocess", "0.70.19", "train"),
    ("fsspec", "2026.2.0", "train"),  # datasets 4.8.5 wants fsspec <= 2026.2.0; the device's version is not known
    ("bitsandbytes", "0.50.2", "bitsandbytes"),
    ("unsloth", "2026.10.9", "unsloth"),
    ("unsloth-zoo", "2026.10.9", "unsloth"),
]

#: What each trimmed wheel loses: path prefixes (Unsloth) or a test on the file name (bitsandbytes).
UNSLOTH_DROP = ("studio/", "unsloth_cli/")
#: bitsandbytes keeps the libraries for CUDA 13.0 (the device's torch) and 13.2, and the CPU one.
BNB_KEEP = ("libbitsandbytes_cuda130.so", "libbitsandbytes_cuda132.so", "libbitsandbytes_cpu.so")


def _drop(name: str, member: str) -> bool:
    if name == "unsloth":
        return member.startswith(UNSLOTH_DROP)
    if name == "bitsandbytes":
        base = member.rsplit("/", 1)[-1]
        return base.startswith("libbitsandbytes_") and base not in BNB_KEEP
    return False


def trim(wheel: Path, name: str) -> int:
    """Rewrite `wheel` without the members `_drop` names (RECORD updated); returns the bytes saved."""
    before = wheel.stat().st_size
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        kept = [i for i in src.infolist() if not _drop(name, i.filename)]
        if len(kept) == len(src.infolist()):
            tmp.unlink()
            return 0
        for info in kept:
            data = src.read(info.filename)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines()
                data = ("\n".join(line for line in lines if not _drop(name, line.split(",", 1)[0])) + "\n").encode()
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    tmp.replace(wheel)
    return before - wheel.stat().st_size


def record_ok(wheel: Path) -> bool:
    """Every file RECORD lists is in the wheel with its hash (what pip's install trusts)."""
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        for line in zf.read(record).decode().splitlines():
            path, digest = [*line.split(","), ""][:2]
            if not digest:
                continue
            algo, _, value = digest.partition("=")
            found = base64.urlsafe_b64encode(hashlib.new(algo, zf.read(path)).digest()).rstrip(b"=").decode()
            if found != value:
                return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", default=str(REPO / ".whl"), help="folder for the wheels (default .whl/)")
    parser.add_argument("--no-unsloth", action="store_true", help="leave out unsloth and unsloth-zoo")
    parser.add_argument("--no-bitsandbytes", action="store_true", help="leave out bitsandbytes (and so Unsloth)")
    args = parser.parse_args(argv)
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    groups = {"core", "train", "bitsandbytes", "unsloth"}
    if args.no_bitsandbytes:
        groups -= {"bitsandbytes", "unsloth"}
    if args.no_unsloth:
        groups.discard("unsloth")
    total = 0
    rows = []
    for name, version, group in WHEELS:
        if group not in groups:
            continue
        prefix = name.replace("-", "_").lower()
        found = [p for p in dest.glob("*.whl") if p.name.lower().startswith(f"{prefix}-{version}-")]
        if not found:
            cmd = [sys.executable, "-m", "pip", "download", "-q", *PLATFORM_ARGS, "-d", str(dest), f"{name}=={version}"]
            subprocess.run(cmd, check=True)
            found = [p for p in dest.glob("*.whl") if p.name.lower().startswith(f"{prefix}-{version}-")]
        wheel = found[0]
        saved = trim(wheel, prefix)
        if saved and not record_ok(wheel):
            print(f"{wheel.name}: RECORD does not match after trimming", file=sys.stderr)
            return 1
        size = wheel.stat().st_size
        total += size
        rows.append((wheel.name, size, saved))
    for wheel_name, size, saved in rows:
        note = f"  (trimmed: -{saved / 2**20:.1f} MiB)" if saved else ""
        print(f"{size / 2**20:7.2f} MiB  {wheel_name}{note}")
    print(f"{total / 2**20:7.2f} MiB  total in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
