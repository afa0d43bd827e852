"""Package attributes imported on first use (PEP 562), so importing a package costs nothing.

`trainkit --help` imports `trainkit_core.errors` and `trainkit_core.models.trained.paths`;
without this, their packages' `__init__` would import pydantic, pluggy and the settings
module for names the help text never uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_attributes(
    package: str, names: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module `__getattr__` and `__dir__` of `package`: `names` maps each public name to its module."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next access is a plain attribute lookup
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
