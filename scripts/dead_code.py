"""Functions, methods and classes that nothing calls: the lint session's dead-code check.

Runs vulture over the packages, their tests, scripts and benches (a helper that only a
test uses is used), and reports definitions nobody names. Variables and attributes are
left out: most of vulture's findings there are fields that pydantic, argparse or a
library reads by name. What frameworks call by name (routes, validators, pytest
fixtures, nox sessions, pluggy hooks, `http.server` handlers) is named below; a job
or factory found by a "module:function" string is named in `CALLED_BY_NAME`.

    python scripts/dead_code.py          # exit 1 and a line per finding, or exit 0
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["packages", "tests", "scripts", "bench", "noxfile.py", "run.py"]
EXCLUDE = ("fake_modal.py", "fake_sdk")
DECORATORS = [
    *(f"@*.{verb}" for verb in ("get", "post", "put", "patch", "delete", "exception_handler", "middleware")),
    "@run_route",  # trainkit_api.run_paths: a route at /v1/runs and its deprecated /v1/jobs twin
    *("@*.command", "@*.group", "@*.callback", "@pytest.fixture", "@*.fixture", "@nox.session", "@*.parametrize"),
    *(
        "@field_validator",
        "@model_validator",
        "@model_serializer",
        "@computed_field",
        "@*.hookimpl",
        "@hookimpl",
        "@*.hookspec",
    ),
    *("@*.function", "@*.cls", "@*.method", "@*.enter", "@*.exit", "@*.asgi_app", "@*.clustered"),
]
#: Found through a "module:function" string or a name in a table, not a call vulture can see.
CALLED_BY_NAME = [
    "rank_job_context",  # JobContext.rank_context, in each rank of a multi-GPU Modal run
    "gpu_ping",  # a job, spawned by name
    "build_public_router",  # trainkit_api.routes' router table
    "stream_whole",  # a Ray actor method called through `_call(name)`
    "storage_call",  # the storage actor's method called through `call(name)`
    "do_GET",  # http.server handlers
    "do_POST",
    "log_message",
    "forward",  # torch modules, called by __call__
    "pytest_*",  # pytest hooks
]


def main() -> int:
    from vulture import Vulture

    scanner = Vulture(ignore_names=CALLED_BY_NAME, ignore_decorators=DECORATORS)
    files = [
        str(path)
        for name in PATHS
        for path in ([ROOT / name] if name.endswith(".py") else sorted((ROOT / name).rglob("*.py")))
        if not any(part in EXCLUDE for part in path.parts) and ".nox" not in path.parts
    ]
    scanner.scavenge(files)
    found = [item for item in scanner.get_unused_code() if item.typ in ("function", "method", "class")]
    for item in found:
        print(f"{Path(item.filename).relative_to(ROOT)}:{item.first_lineno}: unused {item.typ} {item.name!r}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
