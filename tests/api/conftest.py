"""Fixtures of the API tests: one real server per module (see `api_helpers`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import TOKEN, Server, serve, settings_for

from trainkit_api.app import create_app
from trainkit_core.plugins.provider import get_provider


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server per test module, with a token."""
    yield from serve(settings_for(tmp_path_factory.mktemp("api-home"), TOKEN))


@pytest.fixture
def make_app(tmp_path: Path) -> Any:
    """Build an app (not served) on a fresh home, with or without a token."""

    def make(token: str | None = None) -> Any:
        settings = settings_for(tmp_path / "home", token)
        return create_app(settings, provider=get_provider("local", settings))

    return make
