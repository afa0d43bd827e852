"""Hostile audio on the generation routes: a 4xx naming the part, before any model is loaded, never a 500.

The sounds are made here (numpy and soundfile): a second of a 440 Hz tone as WAV and
MP3, then cut short, mislabelled, too long or not audio at all. No model loads: a
request that passes every check gets the 404 of its (missing) model, and a model that
cannot hear is known from its card.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import soundfile
from api_helpers import TOKEN, Server, serve

from trainkit_core.inference.request import MAX_AUDIO_DATA_CHARS
from trainkit_core.settings import ApiSettings, ProviderSettings, Settings

MODEL = "trained/run-20260101-000000-abcdef"  # does not exist: a request that passes the checks gets a 404


def sound(fmt: str = "wav", seconds: float = 1.0, rate: int = 16_000, subtype: str | None = None) -> bytes:
    """A tone of `seconds` as the bytes of a `fmt` file."""
    t = np.arange(int(seconds * rate)) / rate
    buffer = io.BytesIO()
    soundfile.write(buffer, (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), rate, format=fmt, subtype=subtype)
    return buffer.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def parts(data: str, fmt: str = "wav") -> list[dict[str, object]]:
    return [
        {"type": "text", "text": "What is it?"},
        {"type": "input_audio", "input_audio": {"data": data, "format": fmt}},
    ]


def nan_wav() -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, np.full(1600, np.nan, dtype=np.float32), 16_000, format="WAV", subtype="FLOAT")
    return buffer.getvalue()


#: (id, base64 data, format, words the error names). Each is refused with a 400 naming messages[0].content[1].
HOSTILE = [
    ("wav-cut-in-its-samples", b64(sound()[:16_000]), "wav", "cut short"),
    ("wav-cut-in-its-header", b64(sound()[:30]), "wav", "cut short"),
    ("mp3-cut-to-its-first-bytes", b64(sound("mp3")[:100]), "mp3", "does not decode as audio"),
    ("not-audio", b64(b"<html><body>not a sound</body></html>" * 20), "wav", "does not decode as audio"),
    ("mp3-said-to-be-wav", b64(sound("mp3")), "wav", "bytes are MP3"),
    ("wav-said-to-be-mp3", b64(sound()), "mp3", "bytes are WAV"),
    ("another-format", b64(sound()), "ogg", "not one of wav, mp3"),
    ("not-base64", "%%%%", "wav", "base64"),
    ("empty", "", "wav", "no bytes"),
    ("too-long", b64(sound(seconds=31, rate=8_000, subtype="PCM_U8")), "wav", "TRAINKIT_AUDIO_MAX_SECONDS"),
    ("not-finite", b64(nan_wav()), "wav", "not finite"),
    ("over-the-byte-limit", b64(b"RIFF" + b"\0" * (12 * 1024 * 1024 + 100)), "wav", "TRAINKIT_AUDIO_MAX_BYTES"),
]


def error_of(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error"}, body
    return dict(body["error"])


def chat(
    client: httpx.Client, messages: list[dict[str, object]], model: str = MODEL, **extra: object
) -> httpx.Response:
    return client.post("/v1/chat/completions", json={"model": model, "messages": messages, **extra})


@pytest.mark.parametrize(("case", "data", "fmt", "words"), HOSTILE, ids=[h[0] for h in HOSTILE])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_chat_completions_refuses_hostile_audio(
    server: Server, case: str, data: str, fmt: str, words: str, stream: bool
) -> None:
    with server.client() as client:
        response = chat(client, [{"role": "user", "content": parts(data, fmt)}], stream=stream)
    assert response.status_code == 400, response.text[:500]
    message = error_of(response)["message"]
    assert "messages[0].content[1]" in message and words in message, message


@pytest.mark.parametrize(("case", "data", "fmt", "words"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_generate_refuses_hostile_audio(server: Server, case: str, data: str, fmt: str, words: str) -> None:
    messages = [{"role": "user", "content": parts(data, fmt)}]
    with server.client() as client:
        response = client.post("/v1/generate", json={"model_path": MODEL, "messages": messages})
    assert 400 <= response.status_code < 500 and response.status_code != 404, response.text[:500]
    message = error_of(response)["message"]
    assert "messages[0].content[1]" in message and words in message, message


def test_generate_takes_audio_as_data_urls_and_refuses_a_bad_one(server: Server) -> None:
    good, cut = sound(), sound()[:16_000]
    with server.client() as client:
        response = client.post(
            "/v1/generate", json={"model_path": MODEL, "prompt": "hi", "audio": [f"data:audio/wav;base64,{b64(good)}"]}
        )
        assert response.status_code == 404, response.text[:500]  # the sound was fine; the model does not exist
        response = client.post(
            "/v1/generate", json={"model_path": MODEL, "prompt": "hi", "audio": [f"data:audio/wav;base64,{b64(cut)}"]}
        )
        assert 400 <= response.status_code < 500 and response.status_code != 404, response.text[:500]
        assert "cut short" in error_of(response)["message"]
        response = client.post("/v1/generate", json={"model_path": MODEL, "prompt": "hi", "audio": ["/etc/passwd"]})
        assert 400 <= response.status_code < 500 and response.status_code != 404, response.text[:500]
        assert "audio[0]" in error_of(response)["message"]


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_audio"},
        {"type": "input_audio", "input_audio": {"path": "/etc/passwd", "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": b64(sound())}},
        {"type": "input_audio", "input_audio": "data:audio/wav;base64,AAAA"},
        {"type": "audio_url", "audio_url": {"url": "https://example.com/a.wav"}},
    ],
    ids=["no-input-audio", "a-path", "no-format", "a-string", "another-type"],
)
def test_a_malformed_audio_part_is_a_400_naming_it(server: Server, part: dict[str, object]) -> None:
    with server.client() as client:
        response = chat(client, [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}])
    assert response.status_code == 400, response.text[:500]
    assert "messages[0].content[1]" in error_of(response)["message"]


def test_a_huge_data_part_is_a_413_naming_it_before_it_is_decoded(server: Server) -> None:
    huge = "A" * (MAX_AUDIO_DATA_CHARS + 4)
    with server.client(timeout=120) as client:
        response = chat(client, [{"role": "user", "content": parts(huge)}])
        assert response.status_code == 413, response.text[:500]
        error = error_of(response)
        assert error["type"] == "request_too_large"
        assert "messages[0].content[1]" in error["message"] and str(MAX_AUDIO_DATA_CHARS) in error["message"], error
        response = client.post(
            "/v1/generate", json={"model_path": MODEL, "prompt": "hi", "audio": ["data:audio/wav;base64," + huge]}
        )
        assert response.status_code == 413 and "audio[0]" in error_of(response)["message"], response.text[:500]


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose request bodies are bounded at 1 MiB (TRAINKIT_API_MAX_BODY_BYTES)."""
    home = tmp_path_factory.mktemp("api-small")
    yield from serve(
        Settings(provider=ProviderSettings(home=home), api=ApiSettings(api_token=TOKEN, api_max_body_bytes=1024**2))
    )


def test_a_body_over_the_servers_limit_is_a_413_unread(small_server: Server) -> None:
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": parts(b64(sound(seconds=30)))}]})
    assert len(body) > 1024**2
    with small_server.client() as client:
        response = client.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text[:500]
    error = error_of(response)
    assert error["type"] == "request_too_large" and "TRAINKIT_API_MAX_BODY_BYTES" in error["message"], error


def test_too_many_sounds_and_a_sound_in_an_assistant_turn_are_refused(server: Server) -> None:
    good = {"type": "input_audio", "input_audio": {"data": b64(sound(seconds=0.1)), "format": "wav"}}
    with server.client() as client:
        response = chat(client, [{"role": "user", "content": [{"type": "text", "text": "count"}] + [good] * 5}])
        assert response.status_code == 400, response.text[:500]
        assert "messages[0].content[5]" in error_of(response)["message"]
        assert "more than 4 audio parts" in error_of(response)["message"]
        assistant = {"role": "assistant", "content": [{"type": "text", "text": "a"}, good]}
        response = chat(client, [{"role": "user", "content": "hi"}, assistant, {"role": "user", "content": "and?"}])
        assert response.status_code == 400, response.text[:500]
        message = error_of(response)["message"]
        assert "messages[1].content[1]" in message and "user or system messages" in message, message


@pytest.mark.parametrize("fmt", ["wav", "mp3"])
def test_good_audio_gets_past_the_checks_to_the_model_lookup(server: Server, fmt: str) -> None:
    with server.client() as client:
        response = chat(client, [{"role": "user", "content": parts(b64(sound(fmt)), fmt)}])
    assert response.status_code == 404, response.text[:500]  # the sound was fine; the model does not exist


def _fake_model(server: Server, run_id: str, preset: str, base_model: str) -> str:
    """A trained model's files on the models volume (no weights worth loading): enough for its card to be read."""
    models = server.provider.volume("models")
    path = f"trained/{run_id}"
    models.write_bytes(f"{path}/adapter_config.json", b"{}")
    models.write_bytes(f"{path}/adapter_model.safetensors", b"")
    card = {"run_id": run_id, "base_model": base_model, "preset": preset, "chat_format": "gemma3"}
    models.write_bytes(f"{path}/trained_model.json", json.dumps(card).encode())
    return path


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_audio_to_a_model_without_an_audio_tower_is_a_400_before_it_loads(server: Server, stream: bool) -> None:
    from trainkit_core.models.presets import PRESETS

    model = _fake_model(server, "run-20260101-000000-aaaaaa", "tiny", PRESETS["tiny"].base_model)
    with server.client() as client:
        response = chat(client, [{"role": "user", "content": parts(b64(sound()))}], model=model, stream=stream)
    assert response.status_code == 400, response.text[:500]
    message = error_of(response)["message"]
    assert model in message and "has no audio tower" in message, message


def test_a_model_with_an_audio_tower_takes_the_sound(server: Server) -> None:
    """The card check lets a tiny-gemma4-e model's request through (to the model, which is not loaded here)."""
    from trainkit_core.inference.client import prepare
    from trainkit_core.models.presets import TWIN_PRESETS

    preset = TWIN_PRESETS["tiny-gemma4-e"]
    model = _fake_model(server, "run-20260101-000000-bbbbbb", preset.name, preset.base_model)
    request = prepare(
        server.provider, {"model_path": model, "messages": [{"role": "user", "content": parts(b64(sound()))}]}
    )
    assert request.has_audio and request.has_images  # the processor's path
