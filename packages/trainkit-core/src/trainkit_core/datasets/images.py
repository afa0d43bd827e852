"""Image parts in chat examples: their form, where their bytes come from, and their limits.

A message's ``content`` may be a list of parts in OpenAI's form instead of a string::

    [{"type": "text", "text": "What is in the picture?"},
     {"type": "image_url", "image_url": {"url": "images/cat.png"}}]

The ``url`` is a path relative to the dataset folder or a ``data:image/...;base64,``
URL. Remote ``http(s)`` URLs are refused: a run must not depend on a server being up
(and unchanged) when it starts, so the file belongs in the dataset folder, where sync
hashes and uploads it like any other file. Images go in user and system messages; an
assistant message stays text (the model answers in text).

Checking happens in two steps, because only the second needs the files: `parse_content`
(inside the JSONL parser: the shape of the parts) and `check_media` (inside the
validator: readable, inside the folder, decodable by Pillow, within `ImageLimits`).
Pillow is imported only by the second. Audio parts (`trainkit_core.datasets.audio`) go
through the same two steps and the same references: a content's parts are images, audio
and text.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from trainkit_core.datasets.audio import (
    SAMPLING_RATE,
    AudioLimits,
    as_openai_part,
    decode_audio,
    decode_audio_url,
    format_of_path,
    is_audio_ref,
    parse_audio_part,
    relative_path_problem,
    shown,
)
from trainkit_core.datasets.problems import Problem

#: A normalised part: ("text", text), ("image", url) or ("audio", ref).
Part = tuple[str, str]
#: A normalised content: a plain string, or a tuple of parts (hashable, for duplicate checks).
Content = "str | tuple[Part, ...]"

ROLES_WITH_IMAGES = ("system", "user")
_DATA_URL = re.compile(r"^data:(?P<mime>[a-zA-Z0-9.+/-]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)$", re.DOTALL)
#: The formats Pillow must find in an image's bytes (what the processors of Gemma read). MPO is
#: the JPEG many phones write (a JPEG whose APP2 segment indexes more frames, e.g. a depth
#: map): Pillow opens it as "MPO" and decodes its first frame, the picture itself.
FORMATS = ("PNG", "JPEG", "MPO", "WEBP", "GIF", "BMP")


@dataclass(frozen=True)
class ImageLimits:
    """How big images may be (settings `TRAINKIT_IMAGE_*`; see `trainkit_core.settings.DatasetSettings`).

    The defaults fit any photo a phone takes (12-50 megapixels are resized by the
    processor anyway) while refusing decompression bombs and pictures whose bytes
    would dominate a synced dataset.
    """

    max_pixels: int = 50_000_000
    max_bytes: int = 20 * 1024 * 1024
    max_per_example: int = 8
    #: The audio parts' limits, carried along wherever the pictures' go (a dataset's checks, sync).
    audio: AudioLimits = field(default_factory=AudioLimits)

    @classmethod
    def from_settings(cls, settings: Any) -> ImageLimits:
        """The limits a `DatasetSettings` sets, audio's included."""
        return cls(
            settings.image_max_pixels,
            settings.image_max_bytes,
            settings.image_max_per_example,
            AudioLimits.from_settings(settings),
        )


def text_of(content: Any) -> str:
    """The text of a content: itself when a string, else its text parts joined by a newline."""
    if isinstance(content, str):
        return content
    return "\n".join(value for kind, value in content if kind == "text")


def image_urls(content: Any) -> list[str]:
    return media_refs(content, "image")


def media_refs(content: Any, kind: str) -> list[str]:
    """The references of a content's parts of `kind` ("image" or "audio"), in order."""
    if isinstance(content, str):
        return []
    return [value for part_kind, value in content if part_kind == kind]


def as_openai(content: Any) -> Any:
    """A normalised content back in OpenAI's form (a string stays a string)."""
    if isinstance(content, str):
        return content
    return [_openai_part(kind, value) for kind, value in content]


def _openai_part(kind: str, value: str) -> dict[str, Any]:
    if kind == "text":
        return {"type": "text", "text": value}
    if kind == "audio":
        return as_openai_part(value)
    return {"type": "image_url", "image_url": {"url": value}}


def parse_content(
    content: list[Any], at: str, role: str, problem: Callable[[str, str], Problem], *, skip: tuple[str, ...] = ()
) -> tuple[str | tuple[Part, ...] | None, list[Problem]]:
    """Check a list `content` (message `at`, of `role`); its normalised parts, or the problems.

    Text parts alone make a plain string (joined by newlines): such a turn is text and
    trains on any model. Parts of a type in `skip` are another parser's (an assistant's
    ``thinking``, `trainkit_core.datasets.examples`): passed over here, so that the
    other parts keep their indices in the messages.
    """
    if not content:
        return None, [problem("content-empty", f"{at} ({role}) content is an empty list")]
    parts: list[Part] = []
    problems: list[Problem] = []
    for index, part in enumerate(content):
        where = f"{at}.content[{index}]"
        if not isinstance(part, dict):
            problems.append(problem("part-not-object", f"{where} must be an object with a type"))
            continue
        kind = part.get("type")
        if kind in skip:
            continue
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str) or not text.strip():
                problems.append(problem("part-text-invalid", f'{where} is a text part without a non-empty "text"'))
                continue
            parts.append(("text", text))
        elif kind == "image_url":
            url = _url_of(part)
            if url is None:
                problems.append(
                    problem("part-image-invalid", f'{where} needs "image_url": {{"url": "images/NAME.png"}}')
                )
                continue
            if role not in ROLES_WITH_IMAGES:
                problems.append(
                    problem("image-in-assistant", f"{where}: images go in user or system messages, not {role}")
                )
                continue
            reason = url_problem(url)
            if reason is not None:
                problems.append(problem(reason[0], f"{where}: {reason[1]}"))
                continue
            parts.append(("image", url))
        elif kind == "input_audio":
            ref, found = parse_audio_part(part, where, role)
            if ref is None:
                problems.append(problem(*found or ("part-audio-invalid", where)))
                continue
            parts.append(("audio", ref))
        else:
            problems.append(
                problem(
                    "part-type-unknown", f'{where} has type {kind!r}; expected "text", "image_url" or "input_audio"'
                )
            )
    if problems:
        return None, problems
    if not any(kind in ("image", "audio") for kind, _ in parts):
        return "\n".join(text for _, text in parts), []  # text parts only: a plain text turn
    if not any(kind == "text" for kind, _ in parts) and role != "user":
        return None, [problem("content-empty", f"{at} ({role}) has no text part")]
    return tuple(parts), []


def _url_of(part: dict[str, Any]) -> str | None:
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else image_url
    return url if isinstance(url, str) and url.strip() else None


def url_problem(url: str) -> tuple[str, str] | None:
    """(code, message) when `url` is not a usable image reference of a dataset; None when it is."""
    lowered = url.lower()
    if is_remote(url):
        return "image-remote", remote_image_message(
            url, "at train time", "put the file in the dataset folder and give its relative path (images/NAME.png)"
        )
    if lowered.startswith("data:"):
        return None if _DATA_URL.match(url) else ("image-data-url", "a data URL must be data:image/...;base64,...")
    return relative_path_problem(url, "image")


def is_remote(url: str) -> bool:
    return url.lower().startswith(("http://", "https://"))


def remote_image_message(url: str, when: str, instead: str) -> str:
    """The one wording for a refused remote image, wherever it is refused (datasets, `infer --image`)."""
    return f"remote image {shown(url)} is not fetched {when}; {instead}"


def decode_data_url(url: str) -> tuple[str, bytes]:
    """(mime type, bytes) of a base64 data URL; `ValueError` naming what is wrong."""
    match = _DATA_URL.match(url)
    if match is None:
        raise ValueError("not a data:image/...;base64,... URL")
    mime = (match.group("mime") or "").lower()
    if not mime.startswith("image/"):
        raise ValueError(f"MIME type {mime or '(none)'!r} is not an image type")
    try:
        return mime, base64.b64decode(match.group("data"), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the base64 data does not decode") from None


def open_image(data: bytes, limits: ImageLimits) -> Any:
    """A decoded RGB PIL image from `data`, within `limits`; `ValueError` naming what is wrong.

    The size is read from the header before any pixel is decoded, so a decompression
    bomb is refused without the memory it would take. Pillow's own warnings (its
    decompression-bomb warning, a palette's transparency, odd EXIF) are not printed: the
    limits here are trainkit's, and a problem worth telling is a `ValueError`.
    """
    import warnings

    from PIL import Image

    if len(data) > limits.max_bytes:
        raise ValueError(too_many_bytes(len(data), limits.max_bytes))
    try:
        with warnings.catch_warnings():
            # Pillow's DecompressionBombWarning (over its MAX_IMAGE_PIXELS) is silenced, not an error:
            # the limit is trainkit's, checked just below, and may be set above Pillow's.
            warnings.simplefilter("ignore")
            image = Image.open(io.BytesIO(data))
            width, height = image.size
            if width * height > limits.max_pixels:
                raise ValueError(
                    f"{width}x{height} pixels is over the limit of {limits.max_pixels} (TRAINKIT_IMAGE_MAX_PIXELS)"
                )
            if image.format not in FORMATS:
                raise ValueError(f"format {image.format} is not one of {', '.join(FORMATS)}")
            image.load()
            if image.mode == "P" and "transparency" in image.info:
                # what Pillow asks for, rather than a warning on the way to RGB
                return image.convert("RGBA").convert("RGB")
            return image.convert("RGB")
    except ValueError:
        raise
    except Image.DecompressionBombError:  # over twice Pillow's limit: refused inside `Image.open`
        raise ValueError(
            f"its header claims more pixels than Pillow will decode, over the limit of {limits.max_pixels} "
            "(TRAINKIT_IMAGE_MAX_PIXELS): a decompression bomb?"
        ) from None
    except Exception as exc:  # Pillow's decoders raise many types on hostile bytes (OSError, struct.error, ...)
        raise ValueError(f"Pillow cannot decode it ({type(exc).__name__}: {str(exc)[:120]})") from None


def with_image_paths(record: dict[str, Any], path_of: Callable[[str], str]) -> dict[str, Any]:
    """`record` (OpenAI form) with each relative image or audio path replaced by `path_of(path)`; in place."""
    for message in record["messages"]:
        if isinstance(message["content"], list):
            for part in message["content"]:
                url = part.get("image_url", {}).get("url", "")
                if part["type"] == "image_url" and not url.startswith("data:"):
                    part["image_url"]["url"] = path_of(url)
                elif part["type"] == "input_audio" and "path" in part["input_audio"]:
                    part["input_audio"]["path"] = path_of(part["input_audio"]["path"])
    return record


def load_image(ref: str, limits: ImageLimits | None = None) -> Any:
    """The RGB PIL image a resolved reference names: a ``data:`` URL or a file path (job side)."""
    limits = limits or ImageLimits()
    if ref.startswith("data:"):
        return open_image(decode_data_url(ref)[1], limits)
    return open_image(read_image_file(ref, limits.max_bytes), limits)


def too_many_bytes(size: int, max_bytes: int, setting: str = "TRAINKIT_IMAGE_MAX_BYTES") -> str:
    """The one wording of a file over the byte limit (`open_image` and the checks before a read)."""
    return f"{size} bytes is over the limit of {max_bytes} ({setting})"


def load_audio(ref: str, limits: AudioLimits | None = None) -> Any:
    """The samples (mono, 16 kHz) a resolved audio reference names: base64 data or a file path (job side)."""
    limits = limits or AudioLimits()
    if is_audio_ref(ref):
        fmt, data = decode_audio_url(ref)
        return decode_audio(data, fmt, limits)
    data = read_image_file(ref, limits.max_bytes, setting="TRAINKIT_AUDIO_MAX_BYTES")
    return decode_audio(data, format_of_path(ref), limits)


def read_image_file(path: str | os.PathLike[str], max_bytes: int, setting: str = "TRAINKIT_IMAGE_MAX_BYTES") -> bytes:
    """The bytes of the file (a picture, a sound) at `path`; `ValueError` naming `setting` when over `max_bytes`.

    The size is taken from the open file before a byte is read, and the read stops one
    byte past the limit: a huge file (a sparse one of gigabytes takes no disk) is refused
    without the memory it would take. A folder, a FIFO or a device is refused unread.
    """
    info = os.stat(path)  # before the open: opening a FIFO would wait for a writer
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a regular file")
    if info.st_size > max_bytes:
        raise ValueError(too_many_bytes(info.st_size, max_bytes, setting))
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)  # the file may have grown since
    if len(data) > max_bytes:
        raise ValueError(f"over the limit of {max_bytes} bytes ({setting})")
    return data


#: The longest side of a picture kept in an eval report (pixels).
THUMBNAIL_SIDE = 128


def with_thumbnails(row: dict[str, Any]) -> dict[str, Any]:
    """An eval row whose image parts (paths on a volume, or data URLs) became small PNG data URLs."""
    messages = row.get("messages")
    if not isinstance(messages, list) or not any(isinstance(m.get("content"), list) for m in messages):
        return row
    turns = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [_report_part(p) for p in content]
        turns.append({**message, "content": content})
    return {**row, "messages": turns}


def _report_part(part: dict[str, Any]) -> dict[str, Any]:
    """A part as an eval report keeps it: a picture as a thumbnail, a sound as its length in words."""
    if part.get("type") == "image_url":
        return {"type": "image_url", "image_url": {"url": _thumbnail(part["image_url"]["url"])}}
    if part.get("type") == "input_audio":
        audio = part["input_audio"]
        ref = audio["path"] if "path" in audio else f"data:audio/{audio['format']};base64,{audio['data']}"
        return {"type": "text", "text": f"[audio, {len(load_audio(ref)) / SAMPLING_RATE:.1f} s]"}
    return part


def _thumbnail(ref: str) -> str:
    image = load_image(ref)
    image.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def referenced_files(data: bytes) -> list[str]:
    """The relative image and audio paths a JSONL file's lines refer to (in order, each once).

    Lenient on purpose: the files a sync must upload beside the JSONL. A line that
    does not parse refers to nothing here; the validator reports it.
    """
    import json

    found: dict[str, None] = {}
    for raw in data.split(b"\n"):
        if b"image_url" not in raw and b"input_audio" not in raw:
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        for message in record.get("messages", []) if isinstance(record, dict) else []:
            content = message.get("content") if isinstance(message, dict) else None
            for part in content if isinstance(content, list) else []:
                path = _file_of(part) if isinstance(part, dict) else None
                if path is not None:
                    found[path] = None
    return list(found)


def _file_of(part: dict[str, Any]) -> str | None:
    """The relative path a part names, if it names a usable one."""
    if part.get("type") == "image_url":
        url = _url_of(part)
        return url if url is not None and url_problem(url) is None and not url.lower().startswith("data:") else None
    if part.get("type") == "input_audio" and isinstance(part.get("input_audio"), dict):
        ref, _ = parse_audio_part(part, "", "user")
        return ref if ref is not None and not is_audio_ref(ref) else None
    return None


@dataclass(frozen=True)
class Media:
    """What `check_media` needs to know of one kind of part: its words, its limits, its decoder."""

    kind: str  # "image" or "audio": the part kind, and the first word of each problem's code
    plural: str
    max_bytes: int
    max_per_example: int
    setting: str  # the settings' prefix, e.g. TRAINKIT_IMAGE
    decode: Callable[[bytes, str], object]  # (bytes, the reference) -> decoded; ValueError naming what is wrong
    decode_url: Callable[[str], tuple[str, bytes]]
    missing_library: str


def image_media(limits: ImageLimits) -> Media:
    return Media(
        "image", "images", limits.max_bytes, limits.max_per_example, "TRAINKIT_IMAGE",
        lambda data, _ref: open_image(data, limits), decode_data_url, "Pillow",
    )  # fmt: skip


def audio_media(limits: AudioLimits) -> Media:
    def decode(data: bytes, ref: str) -> object:
        fmt = decode_audio_url(ref)[0] if is_audio_ref(ref) else format_of_path(ref)
        return decode_audio(data, fmt, limits)

    return Media(
        "audio", "audio parts", limits.max_bytes, limits.max_per_example, "TRAINKIT_AUDIO",
        decode, decode_audio_url, "soundfile",
    )  # fmt: skip


def check_images(
    examples: Iterable[Any],
    read: Callable[[str], bytes | None],
    limits: ImageLimits,
    outside: type[Exception],
    size: Callable[[str], int | None] | None = None,
) -> tuple[set[int], list[Problem]]:
    """`check_media` of the images."""
    return check_media(examples, read, image_media(limits), outside, size)


def check_media(
    examples: Iterable[Any],
    read: Callable[[str], bytes | None],
    media: Media,
    outside: type[Exception],
    size: Callable[[str], int | None] | None = None,
) -> tuple[set[int], list[Problem]]:
    """Each part of kind `media` of `examples` read (through `read`, which raises `outside` for a file out of
    the folder) and decoded.

    `size(path)`, where given, is a file's size in bytes (None when missing), asked
    before `read`: a file over the byte limit is refused without being read.
    Returns the indices of the examples with a bad part, and the problems at their lines.
    """
    bad: set[int] = set()
    problems: list[Problem] = []
    decoded: dict[str, str | None] = {}  # a file used by many examples is decoded once
    for index, example in enumerate(examples):
        urls = [url for _, content in example.messages for url in media_refs(content, media.kind)]
        found: list[tuple[str, str]] = []
        if len(urls) > media.max_per_example:
            found.append(
                (
                    "too-many-images" if media.kind == "image" else "too-many-audio",
                    f"{len(urls)} {media.plural} in one example, over the limit of {media.max_per_example} "
                    f"({media.setting}_MAX_PER_EXAMPLE)",
                )
            )
            urls = []
        for url in urls:
            if url not in decoded:
                decoded[url] = _check_one(url, read, media, outside, size)
            if decoded[url] is not None:
                code, _, message = str(decoded[url]).partition(" ")
                found.append((code, message))
        if found:
            bad.add(index)
            problems.extend(Problem(example.file, example.line, "error", code, message) for code, message in found)
    return bad, problems


def _check_one(
    url: str,
    read: Callable[[str], bytes | None],
    media: Media,
    outside: type[Exception],
    size: Callable[[str], int | None] | None = None,
) -> str | None:
    """None when the part's bytes are fine, else "code message"."""
    kind = media.kind
    if url.lower().startswith("data:"):
        try:
            _, data = media.decode_url(url)
        except ValueError as exc:
            return f"{kind}-data-url base64 {kind}: {exc}"
        what = f"base64 {kind}" if kind == "audio" else "data URL image"
    else:
        what = f"{kind} {url}"
        try:
            known = size(url) if size is not None else None
            if known is not None and known > media.max_bytes:
                return (
                    f"{kind}-too-large {what}: {too_many_bytes(known, media.max_bytes, media.setting + '_MAX_BYTES')}"
                )
            found = read(url)
        except outside as exc:
            if file_kind := getattr(exc, "kind", None):  # a folder, a FIFO or a device where a file belongs
                return f"{kind}-not-file {what} is {file_kind}, not a regular file"
            return f"{kind}-outside {what} is a link leading out of the dataset folder; copy the file in"
        except OSError as exc:
            return f"{kind}-unreadable {what} cannot be read ({exc.strerror or exc})"
        if found is None:
            return f"{kind}-missing {what} is not in the dataset folder"
        data = found
    try:
        media.decode(data, url)
    except ImportError:
        return f"{kind}-unchecked {what}: {media.missing_library} is not installed (pip install 'trainkit-core[train]')"
    except ValueError as exc:
        code = f"{kind}-too-large" if "over the limit" in str(exc) else f"{kind}-undecodable"
        return f"{code} {what}: {exc}"
    return None
