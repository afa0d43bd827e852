"""trainkit-core: hook specs, plugin manager, settings and job code of trainkit.

Importing this package is cheap: it imports nothing at all until an attribute is
asked for (PEP 562 ``__getattr__``), so ``import trainkit_core.errors`` — what the
CLI does before any command runs — does not pay for pydantic-settings, pluggy or
the settings module. Nothing here ever imports torch, transformers or a provider SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit_core.lazy import lazy_attributes

if TYPE_CHECKING:
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
    from trainkit_core.plugins.provider import Provider, ProviderInfo, get_provider, list_providers
    from trainkit_core.runs.training_run import TrainingRun, wait_all
    from trainkit_core.settings import Settings

__version__ = "0.1.0"

#: Public name -> the module that defines it, imported on first use.
_LAZY = {
    "ConflictError": "trainkit_core.errors",
    "JobError": "trainkit_core.errors",
    "JobTimeout": "trainkit_core.errors",
    "MissingExtraError": "trainkit_core.errors",
    "NotFoundError": "trainkit_core.errors",
    "PluginLoadError": "trainkit_core.errors",
    "ProviderError": "trainkit_core.errors",
    "TrainkitError": "trainkit_core.errors",
    "UsageError": "trainkit_core.errors",
    "Provider": "trainkit_core.plugins.provider",
    "ProviderInfo": "trainkit_core.plugins.provider",
    "get_provider": "trainkit_core.plugins.provider",
    "list_providers": "trainkit_core.plugins.provider",
    "Settings": "trainkit_core.settings",
    "TrainingRun": "trainkit_core.runs.training_run",
    "wait_all": "trainkit_core.runs.training_run",
}

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
    "TrainingRun",
    "TrainkitError",
    "UsageError",
    "get_provider",
    "list_providers",
    "wait_all",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
