"""Runs are served under `/v1/runs`; `/v1/jobs`, the API's first name for them, stays as a deprecated twin.

A run is one training; a job is a function a provider runs (docs/concepts/glossary.md).
The API said "jobs" for runs before the glossary fixed the words; clients written then
keep working, and the schema marks those paths `deprecated` so generated clients and
readers of the reference move to the new ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])

#: The path runs are served under, and the older one kept working.
RUNS, OLD_RUNS = "/runs", "/jobs"


def run_route(router: APIRouter, method: str, suffix: str = "", **options: Any) -> Callable[[Endpoint], Endpoint]:
    """Register the decorated endpoint at `/runs{suffix}` and, deprecated, at `/jobs{suffix}`."""

    def register(endpoint: Endpoint) -> Endpoint:
        router.add_api_route(RUNS + suffix, endpoint, methods=[method], **options)
        router.add_api_route(OLD_RUNS + suffix, endpoint, methods=[method], deprecated=True, **options)
        return endpoint

    return register
