"""`trainkit serve`: uvicorn on loopback by default; a network address needs a token."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import ClassVar

import httpx
import pytest
from api_helpers import free_port

from trainkit_cli.commands.serve import is_loopback
from trainkit_core.plugins.hookspecs import Capabilities, DeploymentStatus, ProviderManifest, hookimpl


def trainkit(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "trainkit_cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow
def test_serve_answers_on_loopback_and_stops(cli_env) -> None:
    port = free_port()
    env = {**cli_env, "TRAINKIT_API_TOKEN": "serve-token-1"}
    proc = trainkit("serve", "--port", str(port), "--log-level", "warning", env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()[0]
                assert time.monotonic() < deadline, "trainkit serve did not come up"
                time.sleep(0.1)
        assert health.json() == {"status": "ok"}
        info = httpx.get(f"http://127.0.0.1:{port}/v1/info", headers={"Authorization": "Bearer serve-token-1"})
        assert info.json()["provider"] == "local"
        assert httpx.get(f"http://127.0.0.1:{port}/v1/info").status_code == 401
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    assert proc.returncode in (0, -15), output  # uvicorn shuts down, then re-raises SIGTERM
    assert "Traceback" not in output
    assert "serve-token-1" not in output


@pytest.mark.slow
def test_a_query_string_token_never_reaches_the_access_log(cli_env) -> None:
    """`?token=` and the like are refused (only the header counts), and uvicorn's access log shows them redacted."""
    port = free_port()
    env = {**cli_env, "TRAINKIT_API_TOKEN": "serve-token-2"}
    proc = trainkit("serve", "--port", str(port), "--log-level", "info", env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()[0]
                assert time.monotonic() < deadline, "trainkit serve did not come up"
                time.sleep(0.1)
        base = f"http://127.0.0.1:{port}/v1/info"
        for query in ("token", "access_token", "api_key", "Token"):
            response = httpx.get(f"{base}?page=2&{query}=serve-token-2&x=1")
            assert response.status_code == 401
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    assert "GET /v1/info?page=2&token=***&x=1 HTTP/1.1" in output  # the line is there, its value is not
    assert "access_token=***&x=1" in output and "api_key=***" in output
    assert "serve-token-2" not in output


@pytest.mark.slow
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_serve_refuses_a_network_address_without_a_token(cli_env, host) -> None:
    env = {k: v for k, v in cli_env.items() if k != "TRAINKIT_API_TOKEN"}
    proc = trainkit("serve", "--host", host, "--port", str(free_port()), env=env)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2
    assert f"refusing to serve on {host!r} without a token" in output
    assert "TRAINKIT_API_TOKEN" in output


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", ""))


class WebEndpointPlugin:
    """A provider that hosts web endpoints: its deployment's `serve()` is what runs."""

    served: ClassVar[list[str]] = []

    @hookimpl
    def provider_manifest(self) -> ProviderManifest:
        return ProviderManifest(name="webfake", capabilities=Capabilities(web_endpoint=True))

    @hookimpl
    def provision(self, provider: str, settings) -> object | None:
        if provider != "webfake":
            return None
        served = self.served

        class Deployment:
            """A whole `Deployment` (the facade checks the answer), plus the `serve()` it hosts."""

            def check(self, functions: list[str]) -> None:
                pass

            def deploy(self) -> DeploymentStatus:
                return DeploymentStatus(state="ready")

            def status(self) -> DeploymentStatus:
                return DeploymentStatus(state="ready")

            def stop(self) -> None:
                pass

            def serve(self) -> None:
                served.append("served")

        return Deployment()


@pytest.fixture
def web_provider() -> Iterator[type[WebEndpointPlugin]]:
    from trainkit_core.plugins.manager import get_plugin_manager

    pm = get_plugin_manager()
    plugin = WebEndpointPlugin()
    pm.register(plugin, name="webfake")
    WebEndpointPlugin.served.clear()
    yield WebEndpointPlugin
    pm.unregister(plugin)


def test_serve_runs_the_providers_web_endpoint(web_provider, monkeypatch) -> None:
    from click.testing import CliRunner

    from trainkit_cli.main import build_cli

    monkeypatch.setenv("TRAINKIT_API_TOKEN", "web-token")
    result = CliRunner().invoke(build_cli(), ["serve", "--provider", "webfake"])
    assert result.exit_code == 0, result.output
    assert web_provider.served == ["served"]


def test_a_public_web_endpoint_needs_a_token(web_provider, monkeypatch) -> None:
    from click.testing import CliRunner

    from trainkit_cli.main import build_cli
    from trainkit_core.errors import UsageError

    monkeypatch.delenv("TRAINKIT_API_TOKEN", raising=False)
    result = CliRunner().invoke(build_cli(), ["--provider", "webfake", "serve"])
    assert isinstance(result.exception, UsageError)
    assert "its URL is public" in str(result.exception)
    assert web_provider.served == []
