"""Audio parts in chat examples: their form, where their bytes come from, their limits, and decoding.

A user or system message's ``content`` may hold audio parts in OpenAI's form::

    {"type": "input_audio", "input_audio": {"data": "<base64>", "format": "wav"}}

or, as images do, a file inside the dataset folder (synced and hashed like any file)::

    {"type": "input_audio", "input_audio": {"path": "audio/one.wav"}}

Inside trainkit a part is ``("audio", ref)``, `ref` a ``data:audio/<format>;base64,`` URL or
the relative path, so the image machinery's references (resolving paths, syncing the files
a JSONL names) serve both. Checking happens where images are checked: the part's shape in
the JSONL parser (`parse_audio_part`), the bytes in the validator (`decode_audio`, called
through `trainkit_core.datasets.images.check_media`). Decoding goes through soundfile
(libsndfile, bundled in its wheel: WAV in any of its encodings, MP3, FLAC, Ogg); soundfile
and numpy are imported only there. Audio reaches the model as Gemma's feature extractor
wants it: mono float32 at 16 kHz, resampled here in the frequency domain.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

#: The formats a part may say; OpenAI's ``input_audio`` takes these two.
FORMATS = ("wav", "mp3")
#: What Gemma's audio feature extractor reads (`Gemma4AudioFeatureExtractor.sampling_rate`).
SAMPLING_RATE = 16_000
ROLES_WITH_AUDIO = ("system", "user")
_AUDIO_URL = re.compile(r"^data:audio/(?P<format>[a-z0-9]+);base64,(?P<data>.*)$", re.DOTALL)
#: The placeholder sizes some WAV writers leave in a header they cannot go back to (a pipe): not a promise.
_UNKNOWN_SIZES = (0, 0xFFFFFFFF)
#: Chunks looked at before the samples; a WAV with more is left to libsndfile, not walked byte by byte.
_MAX_CHUNKS = 1000
#: libsndfile's names of the containers each format may be in (an MP3 reads as "MP3").
_CONTAINERS = {"wav": ("WAV", "WAVEX", "RF64"), "mp3": ("MP3", "MPEG")}


@dataclass(frozen=True)
class AudioLimits:
    """How much audio an example may hold (settings `TRAINKIT_AUDIO_*`; see `DatasetSettings`).

    30 seconds is what Gemma 4's audio encoder takes at once (its feature extractor cuts
    at 480,000 samples, 30 s at 16 kHz); the byte limit is a minute of CD-quality WAV.
    """

    max_seconds: float = 30.0
    max_bytes: int = 12 * 1024 * 1024
    max_per_example: int = 4

    @classmethod
    def from_settings(cls, settings: Any) -> AudioLimits:
        """The limits a `DatasetSettings` sets."""
        return cls(settings.audio_max_seconds, settings.audio_max_bytes, settings.audio_max_per_example)


def parse_audio_part(part: dict[str, Any], where: str, role: str) -> tuple[str | None, tuple[str, str] | None]:
    """``(ref, None)`` for a well-formed ``input_audio`` part, else ``(None, (code, message))``."""
    audio = part.get("input_audio")
    if not isinstance(audio, dict):
        return None, ("part-audio-invalid", f'{where} needs "input_audio": {{"data": BASE64, "format": "wav"}}')
    if role not in ROLES_WITH_AUDIO:
        return None, ("audio-in-assistant", f"{where}: audio goes in user or system messages, not {role}")
    data, path, fmt = audio.get("data"), audio.get("path"), audio.get("format")
    if (data is None) == (path is None):
        return None, ("part-audio-invalid", f'{where}: input_audio needs "data" (base64) or "path", one of them')
    if fmt is not None and fmt not in FORMATS:
        return None, ("audio-format", f"{where}: format {fmt!r} is not one of {', '.join(FORMATS)}")
    if data is not None:
        if not isinstance(data, str) or not data.strip():
            return None, ("part-audio-invalid", f'{where}: "data" must be a non-empty base64 string')
        if fmt is None:
            return None, ("audio-format", f'{where}: base64 audio needs "format" ({" or ".join(FORMATS)})')
        return f"data:audio/{fmt};base64,{data}", None
    if not isinstance(path, str) or not path.strip():
        return None, ("part-audio-invalid", f'{where}: "path" must be a non-empty relative path')
    reason = path_problem(path)
    if reason is not None:
        return None, (reason[0], f"{where}: {reason[1]}")
    suffix = PurePosixPath(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        return None, ("audio-format", f"{where}: {path!r} is not a .{' or .'.join(FORMATS)} file")
    if fmt is not None and fmt != suffix:
        return None, ("audio-format", f"{where}: format {fmt!r} but the file is .{suffix}")
    return path, None


def path_problem(path: str) -> tuple[str, str] | None:
    """(code, message) when `path` cannot name a sound inside the dataset folder; None when it can."""
    if path.lower().startswith(("http://", "https://", "data:")):
        return "audio-path", f"{shown(path)} is a URL; give base64 data or a path relative to the dataset folder"
    return relative_path_problem(path, "audio")


def relative_path_problem(path: str, kind: str) -> tuple[str, str] | None:
    """(code, message) when `path` is not a plain relative path inside the folder (a part of `kind`); None when it is.

    The one check of a dataset's file references, pictures' and sounds' alike.
    """
    if any(ord(char) < 32 or ord(char) == 127 for char in path):  # NUL no file system takes; the rest is a slip
        return f"{kind}-path", f"{shown(path)} holds a control character (a NUL byte or a line break); no file has it"
    if ":" in path.split("/", 1)[0] or path.startswith(("/", "\\", "~")) or "\\" in path:
        return f"{kind}-path", f"{shown(path)} must be a path relative to the dataset folder, with '/'"
    if ".." in PurePosixPath(path).parts:
        return f"{kind}-outside", f"{shown(path)} leads out of the dataset folder"
    return None


def shown(path: str) -> str:
    """A reference as a message shows it: quoted, and cut at 80 characters."""
    return repr(path if len(path) <= 80 else path[:80] + "…")


def is_audio_ref(ref: str) -> bool:
    return ref.startswith("data:audio/")


def format_of_path(path: str) -> str | None:
    """The format a file's suffix says, or None (a synced file's content-addressed name has none)."""
    suffix = PurePosixPath(path).suffix.lower().lstrip(".")
    return suffix if suffix in FORMATS else None


def as_openai_part(ref: str) -> dict[str, Any]:
    """A reference back as OpenAI's ``input_audio`` part (a path as trainkit's ``path`` form)."""
    match = _AUDIO_URL.match(ref)
    if match is not None:
        return {"type": "input_audio", "input_audio": {"data": match.group("data"), "format": match.group("format")}}
    return {"type": "input_audio", "input_audio": {"path": ref}}


def decode_audio_url(ref: str) -> tuple[str, bytes]:
    """(format, bytes) of a ``data:audio/<format>;base64,`` reference; `ValueError` naming what is wrong."""
    match = _AUDIO_URL.match(ref)
    if match is None or match.group("format") not in FORMATS:
        raise ValueError(f"not base64 audio in one of {', '.join(FORMATS)}")
    try:
        return match.group("format"), base64.b64decode(match.group("data"), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the base64 data does not decode") from None


def too_many_bytes(size: int, max_bytes: int) -> str:
    return f"{size} bytes is over the limit of {max_bytes} (TRAINKIT_AUDIO_MAX_BYTES)"


def decode_audio(data: bytes, fmt: str | None, limits: AudioLimits) -> Any:
    """Mono float32 samples at `SAMPLING_RATE` from the bytes of a `fmt` file; `ValueError` naming what is wrong.

    The length is read from the header before any sample is decoded, so an hour of audio
    is refused without the memory it would take. `fmt` None takes what libsndfile reads:
    a synced file, stored under its hash, has no suffix left, and was checked at sync.
    """
    import numpy as np
    import soundfile

    if len(data) > limits.max_bytes:
        raise ValueError(too_many_bytes(len(data), limits.max_bytes))
    cut = wav_cut_short(data)  # libsndfile would read what is left: the sender meant a longer sound
    if cut is not None:
        raise ValueError(cut)
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as sound:
            container, rate, frames = sound.format, sound.samplerate, sound.frames
            if fmt is not None and container not in _CONTAINERS[fmt]:
                raise ValueError(f"said to be {fmt}, but the bytes are {container}")
            if rate <= 0 or frames <= 0:
                raise ValueError("it holds no samples")
            seconds = frames / rate
            if seconds > limits.max_seconds:
                raise ValueError(
                    f"{seconds:.1f} s is over the limit of {limits.max_seconds:g} s (TRAINKIT_AUDIO_MAX_SECONDS)"
                )
            samples = sound.read(dtype="float32", always_2d=True)
    except ValueError:
        raise
    except Exception as exc:  # libsndfile's errors on hostile bytes (soundfile.LibsndfileError, RuntimeError)
        reason = str(exc).rpartition(": ")[2]  # libsndfile names the BytesIO object first
        raise ValueError(f"it does not decode as audio ({type(exc).__name__}: {reason[:120]})") from None
    if samples.shape[0] == 0:
        raise ValueError("it holds no samples")
    mono = samples.mean(axis=1)
    if not np.isfinite(mono).all():
        raise ValueError("it holds samples that are not finite numbers")
    return resample(mono, rate, SAMPLING_RATE)


def resample(samples: Any, rate: int, target: int) -> Any:
    """`samples` at `rate` as at `target` Hz: the spectrum cut (or padded) to the new band, no aliasing."""
    import numpy as np

    if rate == target:
        return samples.astype(np.float32)
    length = max(1, round(len(samples) * target / rate))
    spectrum = np.fft.rfft(samples)
    kept = np.zeros(length // 2 + 1, dtype=spectrum.dtype)
    n = min(len(kept), len(spectrum))
    kept[:n] = spectrum[:n]
    return (np.fft.irfft(kept, n=length) * (length / len(samples))).astype(np.float32)


def wav_cut_short(data: bytes) -> str | None:
    """Why a RIFF WAV's bytes end before its ``data`` chunk says its samples do; None when they do not.

    Only the chunk headers are read. Anything that is not a RIFF WAV is left to libsndfile.
    """
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    offset = 12
    for _ in range(_MAX_CHUNKS):
        if offset + 8 > len(data):
            return f"the WAV is cut short: it ends after {len(data)} bytes, before its samples"
        name, size = data[offset : offset + 4], int.from_bytes(data[offset + 4 : offset + 8], "little")
        if name == b"data":
            present = len(data) - offset - 8
            if size not in _UNKNOWN_SIZES and size > present:
                return f"the WAV is cut short: its header promises {size} bytes of samples, {present} are there"
            return None
        offset += 8 + size + (size & 1)  # chunks are padded to an even length
    return None
