"""Auth on every protected route, the error shape, and what no response may contain."""

from __future__ import annotations

import re

import httpx
import pytest

from trainkit_api.app import PUBLIC_PATHS, route_table
from trainkit_api.errors import validation_message

#: Routes that answer without a token: liveness, and the dashboard's static page
#: (no data: it calls /v1 with the token the user types).
PUBLIC = set(PUBLIC_PATHS) | {"/", "/static/{name:path}"}
SAMPLE_PARAMS = {"run_id": "run-20260101-000000-abcdef", "name": "index.html", "set_name": "demo", "report_id": "abc"}


def protected_requests(app) -> list[tuple[str, str]]:
    """(method, path) of every route of the app that needs the token, path params filled."""
    found = []
    for template, methods in route_table(app):
        if template in PUBLIC:
            continue
        path = re.sub(r"\{(\w+)(:\w+)?\}", lambda m: SAMPLE_PARAMS.get(m.group(1), "x"), template)
        found.extend((method, path) for method in sorted(methods) if method != "HEAD")
    return found


def test_every_protected_route_is_enumerated(server) -> None:
    requests = protected_requests(server.app)
    paths = {path for _, path in requests}
    # The enumeration reaches the routes the issue names (a new route joins by itself).
    assert {"/v1/runs", "/v1/info", "/v1/models", "/v1/chat/completions", "/openapi.json"} <= paths
    assert len(requests) >= 13


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic dGVzdDp0ZXN0"},
        {"Authorization": "test-token-5f1d0c"},  # the right token without the scheme
    ],
    ids=["none", "wrong", "empty", "basic", "no-scheme"],
)
def test_protected_routes_refuse_without_the_right_token(server, headers) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for method, path in protected_requests(server.app):
            response = client.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (method, path, response.status_code, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
            error = response.json()["error"]
            assert error["type"] == "authentication_error"
            assert server.token not in response.text


def test_health_needs_no_token_and_the_token_opens_the_rest(server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/v1/info", headers=server.headers).status_code == 200
        assert client.get("/openapi.json", headers=server.headers).json()["info"]["title"] == "trainkit"


def test_info_names_the_provider_and_versions(server) -> None:
    with server.client() as client:
        info = client.get("/v1/info").json()
    assert info["provider"] == "local"
    assert info["capabilities"]["stop"] is True
    assert info["versions"]["trainkit-api"] == "0.1.0"
    assert info["auth"] is True
    assert server.token not in str(info)


def test_bad_run_id_is_a_validation_error_naming_the_field(server) -> None:
    with server.client() as client:
        response = client.get("/v1/runs/not-a-run")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "run_id"
    assert "run_id (path)" in error["message"]


def test_unknown_run_is_404_in_the_error_shape(server) -> None:
    with server.client() as client:
        response = client.get("/v1/runs/run-20200101-000000-000000")
    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "type": "not_found_error",
            "message": "no run 'run-20200101-000000-000000'",
            "hint": "trainkit runs list shows the runs",
        }
    }


def test_unknown_route_and_method_keep_the_shape(server) -> None:
    with server.client() as client:
        missing = client.get("/v1/nothing-here")
        wrong_method = client.delete("/v1/runs")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["type"] == "method_not_allowed"


def test_body_validation_names_each_field(server) -> None:
    with server.client() as client:
        response = client.post("/v1/chat/completions", json={"model": "trained/x", "messages": [], "temperature": 9})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["param"] == "messages"
    assert "messages:" in error["message"] and "temperature:" in error["message"]


def test_malformed_json_is_a_422_not_a_500(server) -> None:
    with server.client() as client:
        response = client.post(
            "/v1/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 422
    assert "Traceback" not in response.text


def test_validation_message_paths() -> None:
    message, param = validation_message(
        [
            {"loc": ("body", "messages", 0, "role"), "msg": "Input should be 'user'"},
            {"loc": ("query", "limit"), "msg": "too big"},
        ]
    )
    assert param == "messages[0].role"
    assert message == "invalid request: messages[0].role: Input should be 'user'; limit (query): too big"


def test_unexpected_errors_hide_their_details(make_app) -> None:
    """A bug in a route answers 500 with a fixed message: no exception text, no trace."""
    from fastapi.testclient import TestClient

    app = make_app()

    @app.get("/v1/boom")
    def boom() -> None:
        raise RuntimeError("secret-value-in-an-exception")

    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        response = client.get("/v1/boom")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"type": "server_error", "message": "internal error; the server's log has the details"}
    }
    assert "secret-value" not in response.text


def test_without_a_configured_token_the_api_is_open(make_app) -> None:
    from fastapi.testclient import TestClient

    with TestClient(make_app(), base_url="http://127.0.0.1") as client:
        assert client.get("/v1/info").json()["auth"] is False


def test_app_lifecycle_routes_refuse_a_provider_without_an_app(make_app) -> None:
    """The local provider declares no `app_lifecycle`: a 400 that says so, for status, deploy and stop."""
    from fastapi.testclient import TestClient

    with TestClient(make_app("tok")) as client:
        for method, path in (("GET", "/v1/app"), ("POST", "/v1/app/deploy"), ("POST", "/v1/app/stop")):
            response = client.request(method, path, headers={"Authorization": "Bearer tok"})
            assert response.status_code == 400, (path, response.text)
            error = response.json()["error"]
            assert error["type"] == "invalid_request_error"
            assert "provider 'local' has no app" in error["message"] and "--provider modal" in error["hint"]
