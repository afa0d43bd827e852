"""Listing providers (and importing the plugin) does not import modal; calling a hook does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import sys, json
import trainkit_modal.plugin
from trainkit_core import list_providers
names = [p.name for p in list_providers()]
before = "modal" in sys.modules
from trainkit_core import get_provider
get_provider("modal").kv("probe")  # a hook call: now modal is needed
print(json.dumps({"names": names, "before": before, "after": "modal" in sys.modules}))
"""


def test_listing_providers_does_not_import_modal() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=os.environ, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "modal" in result["names"]
    assert result["before"] is False
    assert result["after"] is True


def test_cli_providers_lists_modal_without_importing_it() -> None:
    code = (
        "import sys; from trainkit_cli.main import main\n"
        "try:\n    main(['providers', '--json'])\nexcept SystemExit:\n    pass\n"
        "print('MODAL-IMPORTED' if 'modal' in sys.modules else 'MODAL-NOT-IMPORTED')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("MODAL-NOT-IMPORTED")
    listed = json.loads(out.stdout[: out.stdout.rindex("]") + 1])
    modal = next(p for p in listed if p["name"] == "modal")
    assert modal["package"] == "trainkit-modal"
    assert modal["capabilities"]["app_lifecycle"] is True
    assert modal["capabilities"]["web_endpoint"] is True
