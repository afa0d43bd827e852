"""The stand-ins of a simulated container: the modal SDK's server-backed objects, replaced by the fakes.

Used by the container's entry point, and by every Python process the container's job starts
(torchrun's agent and ranks, through ``child/sitecustomize.py``): on Modal each of them reaches
Modal's servers through the image's modal SDK; here each reaches the test's fake Modal instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

#: What the entry point leaves in its environment for the processes its job starts.
SIM_JSON_ENV = "FAKE_MODAL_SIM_JSON"
CHILD_DIR = Path(__file__).resolve().parent / "child"

#: The modal SDK objects that talk to Modal's servers (or, `Cluster`, read what Modal's
#: container runtime tells a clustered container), as trainkit uses them.
STAND_INS = ("Dict", "Volume", "Function", "Cls", "FunctionCall", "current_function_call_id", "Cluster")


def patch(sim: dict[str, Any]) -> None:
    """Point this process's modal SDK at the fake Modal, and the volumes' mount paths at its folders."""
    import modal

    if sim["sdk"] not in sys.path:
        sys.path.append(sim["sdk"])  # fake_modal.py, after everything the image has
    import fake_modal

    fake_modal.exception = modal.exception  # the fakes raise modal's own exceptions
    for attr in STAND_INS:
        setattr(modal, attr, getattr(fake_modal, attr))
    modal.App.lookup = staticmethod(fake_modal.App.lookup)

    # The volumes' mount paths (/data, /models, ...), redirected to the fake volumes' folders.
    from trainkit_modal import spec as specmod

    specmod.MOUNT_PATHS.update(sim["mounts"])


def hand_down(sim_json: Path) -> None:
    """Let the processes this one starts patch themselves at start-up (``child/sitecustomize.py``)."""
    os.environ[SIM_JSON_ENV] = str(sim_json)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHILD_DIR), os.environ.get("PYTHONPATH")]))
