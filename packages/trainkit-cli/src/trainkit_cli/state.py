"""What every command shares: settings, the chosen provider, output helpers.

Built once per invocation by the root group and passed down through click's
context object, so commands never read the environment themselves.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

    from trainkit_core import Provider, Settings


@dataclass
class CliState:
    provider_name: str | None = None
    _settings: Settings | None = field(default=None, repr=False)
    _provider: Provider | None = field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from trainkit_core import Settings

            self._settings = Settings.from_env()
        return self._settings

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            from trainkit_core import get_provider

            self._provider = get_provider(self.provider_name, self.settings)
        return self._provider


pass_state = click.make_pass_decorator(CliState, ensure=True)


def json_option(func: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def human_size(n: float) -> str:
    """Bytes as people read them (decimal units, as file managers show)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


#: Width for output that goes to a pipe or file: there is no terminal to fit, and
#: rich's default of 80 columns would cut run ids and model paths in tables.
PIPED_WIDTH = 200


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = PIPED_WIDTH
    return out
