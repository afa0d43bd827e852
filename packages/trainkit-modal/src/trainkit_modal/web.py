"""The body of the app's `web` function: trainkit's web API, in a Modal container, over the `modal` provider.

Here the API is a consumer like any other: it reaches the provider through the plugin
manager, never by importing it. The container has the trainkit sources but no
installed distributions, so no entry points to discover: the provider's plugin module
is loaded by the name its entry point gives (``trainkit: modal = trainkit_modal.plugin``)
and registered by hand.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

#: The `modal` entry point of the ``trainkit`` group (trainkit-modal's pyproject.toml).
PLUGIN_MODULE = "trainkit_modal.plugin"
#: Modal answers a web request still running after 150 s with a 303 redirect (its
#: webhook-timeouts guide). A generation not done by this many seconds is answered 202
#: with where to fetch it, well before that.
WEB_ANSWER_WITHIN_S = 120.0
#: Sets `WEB_ANSWER_WITHIN_S` otherwise: the container simulation's slow-start test only.
ANSWER_WITHIN_VARIABLE = "TRAINKIT_MODAL_WEB_ANSWER_WITHIN_S"


def answer_within_s() -> float:
    return float(os.environ.get(ANSWER_WITHIN_VARIABLE) or WEB_ANSWER_WITHIN_S)


def web_app() -> Any:
    """The trainkit web API (an ASGI app) for the `@modal.asgi_app` function."""
    from trainkit_api.app import create_app
    from trainkit_core.plugins.manager import build_plugin_manager, register
    from trainkit_core.plugins.provider import get_provider
    from trainkit_core.settings import Settings

    settings = Settings.from_env()
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, importlib.import_module(PLUGIN_MODULE), name="modal", module=PLUGIN_MODULE)
    return create_app(settings, provider=get_provider("modal", settings, pm=pm), answer_within_s=answer_within_s())
