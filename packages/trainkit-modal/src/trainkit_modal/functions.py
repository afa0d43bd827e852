"""The app's functions and classes, as attributes of this module: importable in a container.

`trainkit_modal.app` declares them with ``serialized=True`` (the app is built in a
function, from settings), but each is an attribute of this module with a matching
``__qualname__``: ``job_<job>`` for every job (``job_ping``, ``job_train``),
``Inference_<size>`` for the inference classes, ``web`` for the API. Modal's pickler
(cloudpickle) therefore ships them *by reference* (module and name), not as code, and
the container imports them from the trainkit sources of its image. A reference loads
on any Python, so a deploy works from every Python trainkit supports while the images
run the one pinned in `images.toml`; pickled code would load only on the Python that
pickled it.

The attributes are made on first access (PEP 562 ``__getattr__``) and cached, so the
unpickler, the app builder and a second access all get the same object. Building a
class imports the SDK (the real ``modal`` in a container); importing this module imports
nothing heavy.
"""

from __future__ import annotations

import sys
from typing import Any

JOB_PREFIX = "job_"
INFER_PREFIX = "Inference_"

_made: dict[tuple[str, int], Any] = {}


def job_function(job: str) -> Any:
    """The function `job_<job>`: runs job `job` in this container (`container.run_job`)."""
    name = f"{JOB_PREFIX}{job}"
    key = (name, 0)
    if key not in _made:

        def run(**kwargs: Any) -> Any:
            from trainkit_modal.container import run_job

            return run_job(job, kwargs)

        run.__name__ = run.__qualname__ = name
        _made[key] = run
    return _made[key]


def inference_class(size: str, modal: Any = None) -> type:
    """The class `Inference_<size>`: `@modal.enter` builds the model cache once per container.

    `run` serves the `infer` job (spawned calls, with their call records); `generate` and
    `stream` serve the provider's `inference_server` directly. Made once per SDK (the
    tests' fake SDK decorates its own copy).
    """
    if modal is None:
        import modal
    name = f"{INFER_PREFIX}{size}"
    key = (name, id(modal))
    if key in _made:
        return _made[key]  # type: ignore[no-any-return]

    class Inference:
        @modal.enter()
        def load(self) -> None:
            from trainkit_modal.container import WarmInference

            self.warm = WarmInference()
            self.warm.preload()

        @modal.method()
        def run(self, kwargs: dict[str, Any]) -> Any:
            from trainkit_modal.container import run_job

            return run_job("infer", kwargs, call=lambda ctx, **request: self.warm.generate(request))

        @modal.method()
        def generate(self, request: dict[str, Any]) -> Any:
            return self.warm.generate(request)

        @modal.method()
        def stream(self, request: dict[str, Any]) -> Any:
            yield from self.warm.stream(request)

    Inference.__name__ = Inference.__qualname__ = name
    _made[key] = Inference
    return Inference


def web() -> Any:
    """The web API's ASGI app (`@modal.asgi_app`)."""
    from trainkit_modal.web import web_app

    return web_app()


def __getattr__(name: str) -> Any:
    if name.startswith(JOB_PREFIX):
        return job_function(name[len(JOB_PREFIX) :])
    if name.startswith(INFER_PREFIX):
        return inference_class(name[len(INFER_PREFIX) :], sys.modules.get("modal"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
