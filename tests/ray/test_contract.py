"""The `ray` provider passes trainkit's conformance suite against a real (loopback) cluster."""

from __future__ import annotations

from typing import ClassVar

from ray_cluster import HEAD_PORT

from trainkit_core.testing import ProviderContract


class TestRayProvider(ProviderContract):
    provider_name = "ray"
    plugin_env: ClassVar[dict[str, str]] = {"TRAINKIT_RAY_ADDRESS": f"127.0.0.1:{HEAD_PORT}"}
    large_file_mb = 16
    # A cancel kills the actor through the GCS; its process ends a moment later.
    cancel_settle_s = 2.0
