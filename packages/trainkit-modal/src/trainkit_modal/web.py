"""The body of the app's `web` function: trainkit's web API, in a Modal container, over the `modal` provider.

Here the API is a consumer like any other: it reaches the provider through the plugin
manager, never by importing it. The container has the trainkit sources but no
installed distributions, so no entry points to discover: the provider's plugin module
is loaded by the name its entry point gives (``trainkit: modal = trainkit_modal.plugin``)
and registered by hand.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The `modal` entry point of the ``trainkit`` group (trainkit-modal's pyproject.toml).
PLUGIN_MODULE = "trainkit_modal.plugin"


def web_app() -> Any:
    """The trainkit web API (an ASGI app) for the `@modal.asgi_app` function."""
    from trainkit_api.app import create_app
    from trainkit_core.plugins import build_plugin_manager, register
    from trainkit_core.provider import get_provider
    from trainkit_core.settings import Settings

    settings = Settings.from_env()
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, importlib.import_module(PLUGIN_MODULE), name="modal", module=PLUGIN_MODULE)
    return create_app(settings, provider=get_provider("modal", settings, pm=pm))
