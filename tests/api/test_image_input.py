"""Hostile images on the generation routes: a 4xx naming the part, before any model is loaded, never a 500."""

from __future__ import annotations

import base64
import io
import zlib

import httpx
import pytest
from api_helpers import Server
from PIL import Image


def png(size: tuple[int, int] = (16, 16)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, "red").save(buffer, format="PNG")
    return buffer.getvalue()


def bomb(width: int = 30000, height: int = 30000) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 4096))
        + chunk(b"IEND", b"")
    )


def url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


#: (id, image URL, words the error names). Each is refused with a 4xx naming messages[0].content[1].
HOSTILE = [
    ("truncated-png", url(png((64, 64))[:50]), "decode"),
    ("decompression-bomb", url(bomb()), "TRAINKIT_IMAGE_MAX_PIXELS"),
    ("wrong-mime-type", url(png(), "text/plain"), "not an image type"),
    ("mime-disagrees", url(png(), "image/jpeg"), "bytes are PNG"),
    ("not-base64", "data:image/png;base64,%%%%", "base64"),
    ("not-an-image", url(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml"), "decode"),
    ("remote-url", "https://example.com/cat.png", "not fetched"),
    ("local-path", "/etc/passwd", "data:image"),
]


def parts(image_url: str) -> list[dict[str, object]]:
    return [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": image_url}}]


def error_text(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    return str(body["error"]["message"])


@pytest.mark.parametrize(("case", "image_url", "words"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_chat_completions_refuses_a_hostile_image(server: Server, case: str, image_url: str, words: str) -> None:
    body = {"model": "trained/run-20260101-000000-abcdef", "messages": [{"role": "user", "content": parts(image_url)}]}
    with server.client() as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    message = error_text(response)
    assert "messages[0].content[1]" in message and words in message


@pytest.mark.parametrize(("case", "image_url", "words"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_generate_refuses_a_hostile_image(server: Server, case: str, image_url: str, words: str) -> None:
    body = {
        "model_path": "trained/run-20260101-000000-abcdef",
        "messages": [{"role": "user", "content": parts(image_url)}],
    }
    with server.client() as client:
        response = client.post("/v1/generate", json=body)
    assert 400 <= response.status_code < 500 and response.status_code != 404, response.text
    message = error_text(response)
    assert words in message


def test_a_huge_data_url_is_refused_before_it_is_decoded(server: Server) -> None:
    huge = "data:image/png;base64," + "A" * (29 * 1024 * 1024)
    with server.client(timeout=120) as client:
        for route, body in (
            ("/v1/generate", {"model_path": "trained/run-20260101-000000-abcdef", "prompt": "hi", "images": [huge]}),
            (
                "/v1/chat/completions",
                {"model": "trained/run-20260101-000000-abcdef", "messages": [{"role": "user", "content": parts(huge)}]},
            ),
        ):
            response = client.post(route, json=body)
            assert 400 <= response.status_code < 500 and response.status_code != 404, (route, response.text[:300])


def test_too_many_images_and_an_image_in_an_assistant_turn_are_refused(server: Server) -> None:
    good = url(png())
    many = [{"type": "text", "text": "count"}] + [{"type": "image_url", "image_url": {"url": good}}] * 9
    assistant = {"role": "assistant", "content": parts(good)}
    with server.client() as client:
        response = client.post(
            "/v1/chat/completions",
            json={"model": "trained/run-20260101-000000-abcdef", "messages": [{"role": "user", "content": many}]},
        )
        assert response.status_code == 400 and "more than 8 images" in error_text(response)
        response = client.post(
            "/v1/chat/completions",
            json={
                "model": "trained/run-20260101-000000-abcdef",
                "messages": [{"role": "user", "content": "hi"}, assistant, {"role": "user", "content": "and?"}],
            },
        )
        assert response.status_code == 400 and "messages[1].content[1]" in error_text(response)


def test_a_good_image_gets_past_the_checks_to_the_model_lookup(server: Server) -> None:
    body = {"model": "trained/run-20260101-000000-abcdef", "messages": [{"role": "user", "content": parts(url(png()))}]}
    with server.client() as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 404, response.text  # the image was fine; the model does not exist
