"""Test helpers for provider plugin authors: the provider conformance suite.

Subclass `ProviderContract` in your plugin's tests and name your provider::

    from trainkit_core.testing import ProviderContract

    class TestMyProvider(ProviderContract):
        provider_name = "myprovider"

Needs pytest, which trainkit-core does not install: only test code imports this.
"""

from trainkit_core.testing.contract import ProviderContract

__all__ = ["ProviderContract"]
