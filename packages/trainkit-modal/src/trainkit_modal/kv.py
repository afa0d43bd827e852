"""The `KVStore` of the Modal provider: one `modal.Dict` per namespace.

Values are stored as JSON text, not as Modal's cloudpickled objects, so what one
Python version writes any other can read and the store holds exactly what the local
provider holds. `put_if_absent` is Modal's one conditional write,
``put(key, value, skip_if_exists=True)``. Dict entries expire after 7 days without
reads or writes: the durable history of a run lives on the models volume.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.settings import Settings
from trainkit_core.toolkit.kv_values import check_key, dump_value
from trainkit_modal.errors import translate

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,63}$")


def dict_name(app_name: str, namespace: str) -> str:
    """The Modal Dict of a namespace: ``<app>-kv-<namespace>`` (Modal names: <64 chars of [A-Za-z0-9._-])."""
    if not isinstance(namespace, str) or not namespace:
        raise UsageError("key-value namespace must be a non-empty string")
    name = f"{app_name}-kv-{namespace}"
    if not _NAME.match(name):
        raise UsageError(
            f"key-value namespace {namespace!r} gives the Modal Dict name {name!r}, which Modal refuses "
            "(only letters, digits, '.', '_' and '-', under 64 characters)"
        )
    return name


class ModalKV:
    """A namespace of trainkit's key-value state in one `modal.Dict` (created when missing)."""

    def __init__(self, sdk: Any, name: str, namespace: str) -> None:
        self.namespace = namespace
        self.name = name
        self._sdk = sdk
        self._dict = sdk.Dict.from_name(name, create_if_missing=True)

    @classmethod
    def for_settings(cls, sdk: Any, settings: Settings, namespace: str) -> ModalKV:
        return cls(sdk, dict_name(settings.provider.app_name, namespace), namespace)

    def __repr__(self) -> str:
        return f"<ModalKV {self.namespace} in Dict {self.name}>"

    _check_key = staticmethod(check_key)
    _dump = staticmethod(dump_value)

    def get(self, key: str, default: Any = None) -> Any:
        self._check_key(key)
        with translate(self._sdk, f"Dict {self.name}"):
            raw = self._dict.get(key)
        return default if raw is None else json.loads(raw)

    def put(self, key: str, value: Any) -> None:
        self._check_key(key)
        data = self._dump(value)
        with translate(self._sdk, f"Dict {self.name}"):
            self._dict.put(key, data)

    def put_many(self, items: Mapping[str, Any]) -> None:
        """Write several keys in one call (``Dict.update``: one request to Modal)."""
        data = {self._check_key(key): self._dump(value) for key, value in items.items()}
        if not data:
            return
        with translate(self._sdk, f"Dict {self.name}"):
            self._dict.update(data)

    def put_if_absent(self, key: str, value: Any) -> bool:
        self._check_key(key)
        data = self._dump(value)
        with translate(self._sdk, f"Dict {self.name}"):
            return bool(self._dict.put(key, data, skip_if_exists=True))

    def delete(self, key: str) -> bool:
        self._check_key(key)
        with translate(self._sdk, f"Dict {self.name}"):
            return self._dict.pop(key, None) is not None

    def keys(self, prefix: str = "") -> list[str]:
        with translate(self._sdk, f"Dict {self.name}"):
            names = list(self._dict.keys())
        return sorted(k for k in names if isinstance(k, str) and k.startswith(prefix))

    def items(self, prefix: str = "") -> list[tuple[str, Any]]:
        with translate(self._sdk, f"Dict {self.name}"):
            found = [(k, v) for k, v in self._dict.items() if isinstance(k, str) and k.startswith(prefix)]
        return sorted(((k, json.loads(v)) for k, v in found), key=lambda kv: kv[0])
