"""The fixture third-party provider (`tests/fixtures/trainkit-dirstore`) passes the suite.

Skipped when it is not installed, except in the `plugin_discovery` nox session, which
installs it non-editable and sets ``TRAINKIT_REQUIRE_DIRSTORE=1`` so that a missing
plugin fails instead of skipping.
"""

from __future__ import annotations

import os

import pytest

from trainkit_core.testing import ProviderContract


@pytest.fixture(autouse=True, scope="module")
def _dirstore_installed() -> None:
    """Skip where the fixture plugin is not installed (only `plugin_discovery` installs it), unless required.

    A fixture, not a check at import: a session that collects this module and selects
    none of its tests (`ml`) must not count a skip.
    """
    if os.environ.get("TRAINKIT_REQUIRE_DIRSTORE") != "1":
        pytest.importorskip("trainkit_dirstore", reason="the trainkit-dirstore fixture plugin is not installed")


class TestDirstoreProvider(ProviderContract):
    provider_name = "dirstore"
