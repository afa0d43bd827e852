"""trainkit-core: hook specs, plugin manager, settings and job code of trainkit.

Importing this package is cheap: nothing here imports torch, transformers or a
provider SDK.
"""

from __future__ import annotations

from trainkit_core.errors import (
    ConflictError,
    JobError,
    JobTimeout,
    MissingExtraError,
    NotFoundError,
    PluginLoadError,
    ProviderError,
    TrainkitError,
    UsageError,
)
from trainkit_core.provider import Provider, ProviderInfo, get_provider, list_providers
from trainkit_core.settings import Settings

__version__ = "0.1.0"

__all__ = [
    "ConflictError",
    "JobError",
    "JobTimeout",
    "MissingExtraError",
    "NotFoundError",
    "PluginLoadError",
    "Provider",
    "ProviderError",
    "ProviderInfo",
    "Settings",
    "TrainkitError",
    "UsageError",
    "get_provider",
    "list_providers",
]
