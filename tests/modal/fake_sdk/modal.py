"""Shadows the real modal SDK in a test's child process (put this folder first on PYTHONPATH).

`import modal` then gives `fake_modal`, whose state is under ``FAKE_MODAL_ROOT``, so
a second process sees the same fake Modal as the test that started it.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fake_modal

sys.modules["modal"] = fake_modal
