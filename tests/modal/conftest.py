"""Fixtures of the Modal provider's tests: no test can reach Modal, and fakes of its SDK.

The environment is cut off before modal is imported anywhere (modal reads its
config at import): no token, an empty config file, and a server address that
refuses connections, so any real call fails at once instead of hanging.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

_EMPTY_CONFIG = Path(tempfile.mkdtemp(prefix="trainkit-modal-test-")) / "modal.toml"
_EMPTY_CONFIG.write_text("")
_OFFLINE_ENV = {
    "MODAL_CONFIG_PATH": str(_EMPTY_CONFIG),
    # Port 9 (discard) on loopback: refused at once, never a remote host.
    "MODAL_SERVER_URL": "http://127.0.0.1:9",
}
_CUT = ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE", "MODAL_ENVIRONMENT")
#: Set by `nox -s modal_live` (which runs only the `modal_live` tests): keep the credentials.
LIVE = os.environ.get("TRAINKIT_MODAL_LIVE") == "1"
if not LIVE:
    for _name in _CUT:
        os.environ.pop(_name, None)
    os.environ.update(_OFFLINE_ENV)

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def modal_offline(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test but `modal_live` ones: no Modal token, an empty Modal config, an unreachable server."""
    if request.node.get_closest_marker("modal_live") is not None:
        if not LIVE:
            pytest.skip("a modal_live test: run it with `nox -s modal_live` (needs Modal credentials)")
        return
    for name in _CUT:
        monkeypatch.delenv(name, raising=False)
    for name, value in _OFFLINE_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def fake_modal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The fake SDK (`fake_modal.py`), its state in a fresh folder shared with its worker processes."""
    import fake_modal as module

    monkeypatch.setenv("FAKE_MODAL_ROOT", str(tmp_path / "fake-modal"))
    yield module
