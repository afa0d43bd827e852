"""`trainkit infer --audio FILE`: a bad file exits 2 with a message naming `--audio FILE` and why, no traceback.

The sounds are made here (numpy and soundfile). No model loads: a file that passes every
check gets the refusal of its (missing) model instead.
"""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile
from cli_helpers import run_main

MODEL = "trained/run-20261130-120000-abcdef"  # does not exist


def sound(fmt: str = "wav", seconds: float = 1.0, rate: int = 16_000, subtype: str | None = None) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    buffer = io.BytesIO()
    soundfile.write(buffer, (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), rate, format=fmt, subtype=subtype)
    return buffer.getvalue()


def infer(*paths: Path) -> tuple[int, str]:
    args = [arg for path in paths for arg in ("--audio", str(path))]
    return run_main("infer", "--model-path", MODEL, "--prompt", "What is it?", *args)


#: (file name, its bytes, words the error names).
BAD = [
    ("cut.wav", sound()[:16_000], "cut short"),
    ("header.wav", sound()[:30], "cut short"),
    ("page.wav", b"<html><body>not a sound</body></html>" * 20, "does not decode as audio"),
    ("named-wrong.wav", sound("mp3"), "bytes are MP3"),
    ("long.wav", sound(seconds=31, rate=8_000, subtype="PCM_U8"), "TRAINKIT_AUDIO_MAX_SECONDS"),
    ("empty.mp3", b"", "no bytes"),
    ("notes.txt", b"just some words, not a sound", "not a WAV or MP3 file"),
]


@pytest.mark.parametrize(("name", "data", "words"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_audio_file_is_refused_naming_it(tmp_path: Path, name: str, data: bytes, words: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    code, output = infer(path)
    assert code == 2, output
    assert f"--audio {path}" in output and words in output, output
    assert "Traceback" not in output


def test_a_file_over_the_byte_limit_is_refused_unread(tmp_path: Path) -> None:
    huge = tmp_path / "huge.wav"
    subprocess.run(["truncate", "-s", str(3 * 1024**3), str(huge)], check=True)  # sparse: gigabytes, no disk
    code, output = infer(huge)
    assert code == 2 and f"--audio {huge}" in output and "TRAINKIT_AUDIO_MAX_BYTES" in output, output


def test_a_missing_file_a_folder_and_a_fifo_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.wav"
    os.mkfifo(fifo)
    for path, words in (
        (tmp_path / "none.wav", "cannot read it"),
        (tmp_path, "not a regular file"),
        (fifo, "not a regular file"),
    ):
        code, output = infer(path)
        assert code == 2 and f"--audio {path}" in output and words in output, output


def test_more_sounds_than_a_request_takes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "short.wav"
    path.write_bytes(sound(seconds=0.1))
    code, output = infer(*[path] * 5)
    assert code == 2 and "more than 4 audio parts" in output, output


@pytest.mark.parametrize(
    ("name", "fmt"), [("tone.wav", "wav"), ("tone.mp3", "mp3"), ("tone", "wav"), ("tone.bin", "mp3")]
)
def test_good_sounds_get_past_the_checks_to_the_model_lookup(tmp_path: Path, name: str, fmt: str) -> None:
    """By suffix, or by their first bytes where the name says nothing."""
    path = tmp_path / name
    path.write_bytes(sound(fmt))
    code, output = infer(path)
    assert code in (2, 3) and "no trained model at" in output, output
    assert "--audio" not in output
