"""A job given a GPU that its torch cannot use fails at once, naming the driver it needs.

Without this check the hf backend trains on the CPU when torch does not see the GPU
(a driver too old for the CUDA that torch was built for: CUDA 13.0 wants NVIDIA's
580.65.06 or newer), hours slower and silently. The sign that a GPU was given is the
NVIDIA device nodes; a machine without them trains on its CPU as before, and so does
one where ``CUDA_VISIBLE_DEVICES`` hides the GPUs on purpose.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trainkit_core.errors import JobError

#: Where the system's files are read from (a test points it at a folder of its own).
SYSTEM_ROOT = Path("/")
#: The device nodes NVIDIA's driver creates for a GPU given to this machine or container.
NVIDIA_DEVICES = ("dev/nvidiactl", "dev/nvidia0")
#: The loaded kernel module's version line ("NVRM version: ... Kernel Module  535.104.05 ...").
DRIVER_FILE = "proc/driver/nvidia/version"
#: NVIDIA's minimum Linux driver per CUDA release (CUDA Toolkit release notes, "CUDA
#: Toolkit and Corresponding Driver Versions"; 13.0 is what images.toml prints too).
MIN_DRIVER = {
    "13.0": "580.65.06",
    "12.8": "570.26",
    "12.6": "560.28.03",
    "12.4": "550.54.14",
    "12.1": "530.30.02",
    "11.8": "520.61.05",
}


def driver_version(root: Path | None = None) -> str | None:
    """The loaded NVIDIA driver's version, or None when it cannot be read."""
    try:
        text = ((root or SYSTEM_ROOT) / DRIVER_FILE).read_text()
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return found.group(1) if found else None


def needed_driver(cuda: str | None) -> str:
    """What torch's CUDA `cuda` ("13.0") needs of the driver, in words."""
    if cuda is None:
        return "a CUDA build of torch (this one is built for the CPU only)"
    minimum = MIN_DRIVER.get(".".join(cuda.split(".")[:2]))
    return f"NVIDIA driver >= {minimum} (CUDA {cuda})" if minimum else f"an NVIDIA driver that supports CUDA {cuda}"


def check_gpu_visible(root: Path | None = None) -> None:
    """`JobError` when this machine was given an NVIDIA GPU that torch cannot use."""
    root = root or SYSTEM_ROOT
    if not any((root / device).exists() for device in NVIDIA_DEVICES):
        return  # no GPU here: a CPU run
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return  # the GPUs are hidden on purpose
    import torch

    if torch.cuda.is_available():
        return
    present = driver_version(root)
    raise JobError(
        f"this machine has an NVIDIA GPU but torch {torch.__version__} cannot use it: it needs "
        f"{needed_driver(torch.version.cuda)}, and the driver here is {present or 'not readable'}; "
        "the job stops instead of training on the CPU",
        hint="run it on a host with that driver (on Modal, another GPU type: TRAINKIT_GPU or the run's gpu), "
        "or set CUDA_VISIBLE_DEVICES= to train on the CPU on purpose",
    )
