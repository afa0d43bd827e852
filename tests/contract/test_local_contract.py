"""The built-in `local` provider passes the conformance suite it ships."""

from __future__ import annotations

from trainkit_core.testing import ProviderContract


class TestLocalProvider(ProviderContract):
    provider_name = "local"
