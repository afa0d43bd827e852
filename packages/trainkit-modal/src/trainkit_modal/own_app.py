"""Handles of the app's functions and classes: this container's own app inside Modal, by name elsewhere.

`Function.from_name` / `Cls.from_name` find DEPLOYED apps only. Inside a container of
an ephemeral app (`trainkit serve --provider modal`, i.e. `app.run()`), the web API's
runner would then start jobs in the deployed app of the same name, or fail when none
is deployed. Modal's own answer for a globally defined app is the container's app
layout: at start the container hydrates the app's functions and classes from it
(`_App._init_container`), so a function calls its siblings of the SAME app version,
deployed or ephemeral. trainkit builds its app in a function, so nothing of it is
hydrated there; `lookup` does the same hydration for the one handle it returns.

Outside a container (the CLI, a local `trainkit serve` of the API) `lookup` is
exactly `from_name`, but in the one process that runs an app itself: under
``modal run -m trainkit_modal.entrypoint`` Modal hydrates the app's objects in the
local process, and the entry point hands them over (`running_here`), so its jobs run
in that app, as the seed's ``modal run app.py --action train`` did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from trainkit_core.errors import NotFoundError

#: The apps this process runs itself (`running_here`), by app name: (app id, declared objects).
_running_here: dict[str, tuple[str, Mapping[str, Any]]] = {}


@contextlib.contextmanager
def running_here(app_name: str, app_id: str, objects: Mapping[str, Any]) -> Iterator[None]:
    """While the block runs, `lookup` answers for `app_name` with `objects`: the app `app_id` this process runs."""
    _running_here[app_name] = (app_id, objects)
    try:
        yield
    finally:
        _running_here.pop(app_name, None)


def running_app_id(app_name: str) -> str | None:
    """The id of app `app_name` when this process runs it (`running_here`), else None."""
    here = _running_here.get(app_name)
    return here[0] if here is not None else None


def container_app_id(sdk: Any) -> str | None:
    """The id of the app this process runs in as a Modal container, or None outside one."""
    return _own_app(sdk)


def lookup(sdk: Any, kind: str, app_name: str, tag: str) -> Any:
    """The function (`kind` "function") or class (`kind` "class") `tag`: this container's app's, else by name.

    By name the handle is lazy (hydrated by Modal when used: deployed apps only); in a
    container it is hydrated from the container's own app and never looked up by name;
    in the process that runs the app (`running_here`) it is that app's own object.
    """
    here = _running_here.get(app_name)
    if here is not None and tag in here[1]:
        return here[1][tag]
    handle = sdk.Cls.from_name(app_name, tag) if kind == "class" else sdk.Function.from_name(app_name, tag)
    _own_app(sdk, handle, kind, tag)
    return handle


def _own_app(sdk: Any, handle: Any = None, kind: str = "function", tag: str = "") -> str | None:
    """This container's app id, None outside a container; hydrates `handle` (`kind` `tag`) from that app's layout.

    The one place that uses modal's private API, read from modal 1.6.4 (the project
    pins modal>=1.6.4,<1.7): `App._get_container_app` (modal/app.py; None outside a
    container), the `_App`'s `_running_app` (`RunningApp`: `app_id`, `function_ids`,
    `class_ids`, `object_handle_metadata`, modal/running_app.py) and `_client`, both set
    by `_App._init_container` when the container starts; `_Object._hydrate`. A class is
    its service function ``<tag>.*``, hydrated first, then the class
    (`_Cls._hydrate_metadata` reads the methods from that function), as
    `_init_container` and `Cls.from_name` do. A hydrated handle is never looked up by
    name, so its `with_options` and spawns go to this app.
    """
    container = sdk.App._get_container_app()
    if container is None:
        return None
    app = sdk._utils.async_utils.synchronizer._translate_in(container)
    running, client = app._running_app, app._client
    if handle is None:
        return str(running.app_id)
    if kind == "class":
        service = sdk._utils.async_utils.synchronizer._translate_in(handle)._class_service_function
        parts = [(service, running.function_ids.get(f"{tag}.*")), (handle, running.class_ids.get(tag))]
    else:
        parts = [(handle, running.function_ids.get(tag))]
    for obj, object_id in parts:
        if object_id is None:
            raise NotFoundError(f"this container's Modal app ({running.app_id}) declares no {kind} {tag!r}")
        obj._hydrate(object_id, client, running.object_handle_metadata.get(object_id))
    return str(running.app_id)


__all__ = ["container_app_id", "lookup", "running_app_id", "running_here"]
