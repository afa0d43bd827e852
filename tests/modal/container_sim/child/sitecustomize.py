"""Run at the start of every Python process a simulated container's job starts (see `modal_patch`)."""

import json
import os
import sys
from pathlib import Path

if os.environ.get("FAKE_MODAL_SIM_JSON"):
    sys.path.append(str(Path(__file__).resolve().parent.parent))
    import modal_patch

    sys.path.pop()
    modal_patch.patch(json.loads(Path(os.environ["FAKE_MODAL_SIM_JSON"]).read_text()))
