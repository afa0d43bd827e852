"""Remote image URLs in generation requests: refused, or (where the server allows it) fetched into data URLs.

Why off by default: fetching lets any client make the server request any URL it can
reach (its cloud's metadata service, hosts behind its firewall): server-side request
forgery. `TRAINKIT_API_FETCH_IMAGE_URLS=true` is for servers whose clients are
trusted. Even then a fetch is bounded: the image byte limit (read no further), a
total time limit, redirects only to http(s), and an ``image/*`` content type. Each
failure is a 4xx naming the part, before anything reaches the model; the picture
itself is then checked like any data URL (`check_request_images`).
"""

from __future__ import annotations

import base64
import http.client
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urljoin, urlsplit

from trainkit_core.datasets.images import ImageLimits, is_remote
from trainkit_core.errors import UsageError
from trainkit_core.settings import Settings

#: Redirects a fetch follows at most.
MAX_REDIRECTS = 5
CHUNK_BYTES = 64 * 1024


class RemoteImageTooLarge(UsageError):
    """A remote image over the byte limit: 413, like a request body over its limit."""

    http_status = 413


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """urllib follows redirects to ftp: too; a fetch may only go on to http(s)."""

    max_redirections = MAX_REDIRECTS

    def http_error_302(self, req: Any, fp: Any, code: int, msg: str, headers: Any) -> Any:
        target = urljoin(req.full_url, headers.get("Location") or headers.get("URI") or "")
        if urlsplit(target).scheme.lower() not in ("http", "https"):
            raise UsageError(f"redirected to {_shown(target)}, which is not http(s)")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _shown(url: str) -> str:
    """The URL for a message: without any user:password, cut to 80 characters."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        url = parts._replace(netloc=parts.hostname or "").geturl()
    return repr(url if len(url) <= 80 else url[:80] + "…")


def _image_slots(payload: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(where, container, key) of each image URL of a generation request dict, in request order."""
    slots: list[tuple[str, Any, Any]] = []
    for i, message in enumerate(payload.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            image_url = part.get("image_url") if isinstance(part, dict) else None
            if isinstance(image_url, dict) and isinstance(image_url.get("url"), str):
                slots.append((f"messages[{i}].content[{j}]", image_url, "url"))
    images = payload.get("images")
    for k, url in enumerate(images or []):
        if isinstance(url, str):
            slots.append((f"images[{k}]", images, k))
    return slots


def resolve_remote_images(payload: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """`payload` with its http(s) image URLs fetched into data URLs; `UsageError` (4xx) naming the part."""
    slots = [slot for slot in _image_slots(payload) if is_remote(slot[1][slot[2]])]
    if not slots:
        return payload
    if not settings.api.api_fetch_image_urls:
        raise UsageError(
            f"{slots[0][0]}: remote image URLs are not fetched by this server; send the image as a data: URL",
            hint="a server's operator can allow it with TRAINKIT_API_FETCH_IMAGE_URLS=true",
        )
    limits = ImageLimits.from_settings(settings.datasets)
    if len(slots) > limits.max_per_example:
        raise UsageError(
            f"{slots[limits.max_per_example][0]}: more than {limits.max_per_example} images in one request"
        )
    for where, container, key in slots:
        container[key] = fetch_image(container[key], where, limits, settings.api.api_image_fetch_timeout_s)
    return payload


def fetch_image(url: str, where: str, limits: ImageLimits, timeout_s: float) -> str:
    """The image at `url` as a data URL, within `limits`.

    Each socket wait is bounded by `timeout_s`, and the total is checked between reads,
    so a server that trickles bytes is cut off too (after at most about twice `timeout_s`).
    """
    deadline = time.monotonic() + timeout_s
    opener = urllib.request.build_opener(_HttpOnlyRedirects)
    request = urllib.request.Request(url, headers={"Accept": "image/*", "User-Agent": "trainkit-api"})
    timed_out = f"{where}: {_shown(url)} did not arrive within {timeout_s:g} s (TRAINKIT_API_IMAGE_FETCH_TIMEOUT_S)"
    try:
        with opener.open(request, timeout=timeout_s) as response:
            mime = (response.headers.get_content_type() or "").lower()
            if not mime.startswith("image/"):
                raise UsageError(f"{where}: {_shown(url)} answered content type {mime!r}, not an image type")
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > limits.max_bytes:
                raise _too_large(where, url, limits)
            data = bytearray()
            while True:
                if time.monotonic() > deadline:
                    raise UsageError(timed_out)
                chunk = response.read1(CHUNK_BYTES)  # what has come, not a full chunk
                if not chunk:
                    break
                data += chunk
                if len(data) > limits.max_bytes:
                    raise _too_large(where, url, limits)
    except UsageError as exc:
        if exc.message.startswith(where):
            raise
        raise type(exc)(f"{where}: {exc.message}", hint=exc.hint) from None
    except urllib.error.HTTPError as exc:
        exc.close()
        raise UsageError(f"{where}: fetching {_shown(url)} failed: HTTP {exc.code}") from None
    except TimeoutError:
        raise UsageError(timed_out) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise UsageError(timed_out) from None
        raise UsageError(f"{where}: fetching {_shown(url)} failed: {exc.reason}") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a reset, a cut-off body, a bad URL
        raise UsageError(f"{where}: fetching {_shown(url)} failed: {exc}") from None
    return f"data:{mime};base64,{base64.b64encode(bytes(data)).decode()}"


def _too_large(where: str, url: str, limits: ImageLimits) -> RemoteImageTooLarge:
    return RemoteImageTooLarge(
        f"{where}: {_shown(url)} is over the limit of {limits.max_bytes} bytes (TRAINKIT_IMAGE_MAX_BYTES)"
    )
