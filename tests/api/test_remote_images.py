"""Remote image URLs on the generation routes, against a real image server on 127.0.0.1.

Off by default (a 400 before any fetch); where TRAINKIT_API_FETCH_IMAGE_URLS allows it,
each fetch is bounded in bytes and time, follows redirects to http(s) only, takes
``image/*`` content only, and each failure is a 4xx naming the part. A fetched picture
is then checked like a data URL (the model lookup answers 404 here: no model is trained).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
from api_helpers import TOKEN, Server, serve
from test_image_input import error_text, parts, png

from trainkit_core.settings import ApiSettings, DatasetSettings, ProviderSettings, Settings

MODEL = "trained/run-20260101-000000-abcdef"
MAX_BYTES = 50_000
TIMEOUT_S = 1.0


class ImageHandler(BaseHTTPRequestHandler):
    """Routes: a picture, and each way a fetch can go wrong."""

    protocol_version = "HTTP/1.0"
    seen: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, mime: str, body: bytes, length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", mime)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        ImageHandler.seen.append(self.path)
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the API gave up on it, as it should

    def _route(self) -> None:
        redirects = {
            "/to-red": "/red.png",
            "/to-ftp": "ftp://127.0.0.1/red.png",
            "/to-file": "file:///etc/passwd",
            "/loop": "/loop",
            "/to-metadata": "http://169.254.169.254/latest/meta-data/",
            "/to-localhost": f"http://localhost:{self.server.server_address[1]}/red.png",
            "/to-mapped": f"http://[::ffff:127.0.0.1]:{self.server.server_address[1]}/red.png",
        }
        if self.path == "/red.png":
            self._send(200, "image/png", png(), len(png()))
        elif self.path == "/mislabelled":
            self._send(200, "image/jpeg", png(), len(png()))
        elif self.path == "/page":
            self._send(200, "text/html; charset=utf-8", b"<html>not a picture</html>")
        elif self.path == "/huge-declared":
            self._send(200, "image/png", b"\x89PNG", 10 * MAX_BYTES)
        elif self.path == "/huge-unannounced":
            self._send(200, "image/png", b"\x89PNG" + b"\0" * (4 * MAX_BYTES))
        elif self.path == "/slow":
            time.sleep(3 * TIMEOUT_S)
            self._send(200, "image/png", png(), len(png()))
        elif self.path == "/trickle":
            self._send(200, "image/png", b"\x89PNG")
            for _ in range(int(6 * TIMEOUT_S / 0.2)):
                self.wfile.write(b"\0")
                self.wfile.flush()
                time.sleep(0.2)
        elif self.path in redirects:
            self.send_response(302)
            self.send_header("Location", redirects[self.path])
            self.end_headers()
        else:
            self._send(404, "text/plain", b"no such picture")


@pytest.fixture(scope="module")
def images() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ImageHandler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def fetching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    settings = Settings(
        provider=ProviderSettings(home=Path(tmp_path_factory.mktemp("api-home"))),
        # the image server is on 127.0.0.1, which is refused unless listed: these tests list it, by address
        api=ApiSettings(
            api_token=TOKEN,
            api_fetch_image_urls=True,
            api_image_fetch_timeout_s=TIMEOUT_S,
            api_image_fetch_allowed_hosts="127.0.0.1",
        ),
        datasets=DatasetSettings(image_max_bytes=MAX_BYTES),
    )
    yield from serve(settings)


@pytest.fixture(scope="module")
def public_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Fetching on, no allow-list: only public addresses may be fetched."""
    settings = Settings(
        provider=ProviderSettings(home=Path(tmp_path_factory.mktemp("api-home"))),
        api=ApiSettings(api_token=TOKEN, api_fetch_image_urls=True, api_image_fetch_timeout_s=TIMEOUT_S),
        datasets=DatasetSettings(image_max_bytes=MAX_BYTES),
    )
    yield from serve(settings)


@pytest.fixture()
def header_trickler() -> Iterator[str]:
    """A raw socket server on 127.0.0.1 whose headers never end: after the status line, one byte every 0.2 s.

    Each byte comes well within the socket timeout, so only one deadline over the whole fetch ends it.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def run() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4096)
                try:
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: image/png\r\nX-Pad: ")
                    while not stop.is_set():  # a header that never ends, one byte at a time
                        conn.sendall(b"a")
                        time.sleep(0.2)
                except OSError:
                    pass  # the API hung up on it, as it should

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    listener.close()


def chat(server: Server, image_url: str) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": parts(image_url)}]}
    with server.client() as client:
        return client.post("/v1/chat/completions", json=body)


def test_remote_urls_are_refused_by_default_without_any_fetch(server: Server, images: str) -> None:
    ImageHandler.seen.clear()
    response = chat(server, f"{images}/red.png")
    assert response.status_code == 400, response.text
    message = error_text(response)
    assert "messages[0].content[1]" in message and "not fetched" in message
    assert "TRAINKIT_API_FETCH_IMAGE_URLS" in response.json()["error"]["hint"]
    with server.client() as client:
        response = client.post("/v1/generate", json={"model_path": MODEL, "prompt": "hi", "images": [images + "/x"]})
    assert response.status_code == 400 and "images[0]" in error_text(response)
    assert ImageHandler.seen == []


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("/page", 400, "'text/html', not an image type"),
        ("/huge-declared", 413, f"over the limit of {MAX_BYTES} bytes"),
        ("/huge-unannounced", 413, f"over the limit of {MAX_BYTES} bytes"),
        pytest.param("/slow", 400, "TRAINKIT_API_IMAGE_FETCH_TIMEOUT_S", marks=pytest.mark.slow),
        pytest.param("/trickle", 400, "TRAINKIT_API_IMAGE_FETCH_TIMEOUT_S", marks=pytest.mark.slow),
        ("/to-ftp", 400, "which is not http(s)"),
        ("/loop", 400, "too many redirects"),
        ("/to-metadata", 400, "169.254.169.254, which is not a public address"),
        ("/to-localhost", 400, "which is not a public address"),  # 'localhost' is not on the allow-list
        ("/to-mapped", 400, "which is not a public address"),
        ("/to-file", 400, "which is not http(s)"),
        ("/missing", 400, "HTTP 404"),
        ("/mislabelled", 400, "bytes are PNG"),  # fetched, then checked like any picture
    ],
)
def test_a_bad_fetch_is_a_4xx_naming_the_part(
    fetching: Server, images: str, path: str, status: int, words: str
) -> None:
    response = chat(fetching, images + path)
    assert response.status_code == status, response.text
    message = error_text(response)
    # /slow and /trickle end with a whole picture (3 and 6 timeouts later): the timeout's words prove the cut
    assert "messages[0].content[1]" in message and words in message


def test_a_fetched_picture_passes_the_checks_through_a_redirect(fetching: Server, images: str) -> None:
    ImageHandler.seen.clear()
    for url in (f"{images}/red.png", f"{images}/to-red"):
        response = chat(fetching, url)
        assert response.status_code == 404, response.text  # the picture was fine; the model does not exist
    with fetching.client() as client:
        body = {"model_path": MODEL, "prompt": "hi", "images": [f"{images}/red.png"], "stream": True}
        response = client.post("/v1/generate", json=body)
    assert response.status_code == 404, response.text  # before any stream starts
    assert ImageHandler.seen == ["/red.png", "/to-red", "/red.png", "/red.png"]


def test_a_closed_port_is_a_4xx_naming_the_part(fetching: Server) -> None:
    from api_helpers import free_port

    response = chat(fetching, f"http://user:secret@127.0.0.1:{free_port()}/red.png")
    assert response.status_code == 400, response.text
    message = error_text(response)
    assert "messages[0].content[1]" in message and "failed" in message and "secret" not in message


def test_headers_trickled_a_byte_at_a_time_are_cut_at_the_fetch_timeout(fetching: Server, header_trickler: str) -> None:
    # the client's read timeout only keeps a broken fetch from hanging the suite (it is not a timing check):
    # without a deadline over the headers the API would wait on them for hours
    body = {"model": MODEL, "messages": [{"role": "user", "content": parts(header_trickler + "/red.png")}]}
    with fetching.client(timeout=30) as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    message = error_text(response)
    assert "messages[0].content[1]" in message and "TRAINKIT_API_IMAGE_FETCH_TIMEOUT_S" in message


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "0x7f000001",  # hexadecimal, decimal and octal spellings of 127.0.0.1
        "2130706433",
        "0177.0.0.1",
        "localhost",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::]",
        "0.0.0.0",
        "10.1.2.3",
        "192.168.0.1",
        "172.16.0.1",
        "169.254.169.254",  # a cloud's metadata service
        "100.64.0.1",
        "224.0.0.1",
        "[fe80::1]",
        "[fd00::1]",
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::]",
    ],
)
def test_non_public_addresses_are_refused_without_an_allow_list(public_only: Server, images: str, host: str) -> None:
    ImageHandler.seen.clear()
    port = images.rsplit(":", 1)[1]
    response = chat(public_only, f"http://{host}:{port}/red.png")
    assert response.status_code == 400, response.text
    message = error_text(response)
    assert "messages[0].content[1]" in message and "not a public address" in message
    assert "TRAINKIT_API_IMAGE_FETCH_ALLOWED_HOSTS" in response.json()["error"]["hint"]
    assert ImageHandler.seen == []


def test_a_redirect_from_an_allowed_host_to_loopback_is_refused(fetching: Server, images: str) -> None:
    ImageHandler.seen.clear()
    response = chat(fetching, f"{images}/to-localhost")
    assert response.status_code == 400, response.text
    assert "'localhost' is at" in error_text(response)
    assert ImageHandler.seen == ["/to-localhost"]  # the allowed hop only; the loopback one never happened


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://[::1/x.png", "not a valid URL"),
        ("http://user:secret@[::1/x.png", "not a valid URL"),
        ("http://127.0.0.1:99999/x.png", "not a valid URL"),
        ("http://127.0.0.1:port/x.png", "not a valid URL"),
        ("http:///x.png", "names no host"),
    ],
)
def test_a_malformed_url_is_a_400_naming_the_part(fetching: Server, url: str, words: str) -> None:
    response = chat(fetching, url)
    assert response.status_code in (400, 422), response.text
    message = error_text(response)
    assert "messages[0].content[1]" in message and words in message
    assert "secret" not in message
