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
import ipaddress
import socket
import ssl
import threading
import time
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


def _shown(url: str) -> str:
    """The URL for a message: without any user:password, cut to 80 characters."""
    try:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            url = parts._replace(netloc=parts.hostname or "").geturl()
    except ValueError:  # malformed (an unclosed [IPv6 address): drop anything up to an @ in it
        scheme, sep, rest = url.partition("://")
        url = scheme + sep + rest.rpartition("@")[2] if sep else url
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
        container[key] = fetch_image(
            container[key],
            where,
            limits,
            settings.api.api_image_fetch_timeout_s,
            settings.api.api_image_fetch_allowed_hosts,
        )
    return payload


def fetch_image(url: str, where: str, limits: ImageLimits, timeout_s: float, allowed_hosts: str = "") -> str:
    """The image at `url` as a data URL, within `limits`.

    Why not urllib: it resolves the name itself (so a check before it could be fooled by DNS
    rebinding), and its timeout bounds each socket wait, not the whole fetch. Here each hop
    resolves the name once, refuses non-public addresses (unless the host is in
    `allowed_hosts`), connects to exactly the address checked, and one timer shuts the socket
    at the overall deadline, whether it is connecting, reading headers or reading the body.
    """
    allowed = _allowed_hosts(allowed_hosts)
    timed_out = f"{where}: {_shown(url)} did not arrive within {timeout_s:g} s (TRAINKIT_API_IMAGE_FETCH_TIMEOUT_S)"
    deadline = _Deadline(timeout_s)
    try:
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            response = _request(current, allowed, deadline)
            if response.status in (301, 302, 303, 307, 308):
                location = response.getheader("Location") or ""
                response.close()
                current = urljoin(current, location)
                continue
            if response.status >= 400:
                response.close()
                raise UsageError(f"fetching {_shown(url)} failed: HTTP {response.status}")
            if response.status != 200:
                response.close()
                raise UsageError(f"fetching {_shown(url)} answered HTTP {response.status}, not 200")
            return _read_image(response, url, where, limits, deadline)
        raise UsageError(f"fetching {_shown(url)} failed: too many redirects (more than {MAX_REDIRECTS})")
    except UsageError as exc:
        if deadline.expired:
            raise UsageError(timed_out) from None
        if exc.message.startswith(where):
            raise
        raise type(exc)(f"{where}: {exc.message}", hint=exc.hint) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a reset, a cut-off body, a bad URL
        if deadline.expired or isinstance(exc, TimeoutError):
            raise UsageError(timed_out) from None
        raise UsageError(f"{where}: fetching {_shown(url)} failed: {exc}") from None
    finally:
        deadline.cancel()


def _read_image(
    response: http.client.HTTPResponse, url: str, where: str, limits: ImageLimits, deadline: _Deadline
) -> str:
    with response:
        mime = (response.headers.get_content_type() or "").lower()
        if not mime.startswith("image/"):
            raise UsageError(f"{where}: {_shown(url)} answered content type {mime!r}, not an image type")
        length = response.getheader("Content-Length")
        if length and length.isdigit() and int(length) > limits.max_bytes:
            raise _too_large(where, url, limits)
        data = bytearray()
        while True:
            chunk = response.read1(CHUNK_BYTES)  # what has come, not a full chunk
            if deadline.expired:
                raise UsageError("deadline")  # replaced by the timeout message
            if not chunk:
                break
            data += chunk
            if len(data) > limits.max_bytes:
                raise _too_large(where, url, limits)
    return f"data:{mime};base64,{base64.b64encode(bytes(data)).decode()}"


class _Deadline:
    """One deadline for a whole fetch: at it, the socket in use is shut, which ends any wait on it."""

    def __init__(self, timeout_s: float) -> None:
        self._end = time.monotonic() + timeout_s
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.expired = False
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        left = self._end - time.monotonic()
        if left <= 0 or self.expired:
            self.expired = True
            raise TimeoutError("deadline")
        return left

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._sock is not None:
                _shut(self._sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected yet, or already closed: the next wait ends anyway


def _allowed_hosts(text: str) -> frozenset[str]:
    return frozenset(_host_key(h) for h in text.split(",") if h.strip())


def _host_key(host: str) -> str:
    return host.strip().lower().rstrip(".").strip("[]")


def _request(url: str, allowed: frozenset[str], deadline: _Deadline) -> http.client.HTTPResponse:
    """GET `url` from the address its name resolves to, once that address is checked."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"{_shown(url)} is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UsageError(f"redirected to {_shown(url)}, which is not http(s)")
    host = parts.hostname
    if not host:
        raise UsageError(f"{_shown(url)} is not a valid URL: it names no host")
    port = port or (443 if scheme == "https" else 80)
    address = _checked_address(host, port, allowed, deadline)
    connection: http.client.HTTPConnection
    timeout = deadline.remaining()
    if scheme == "https":
        connection = _PinnedHTTPSConnection(host, port, address, deadline, timeout=timeout)
    else:
        connection = _PinnedHTTPConnection(host, port, address, deadline, timeout=timeout)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    try:
        connection.request("GET", path, headers={"Accept": "image/*", "User-Agent": "trainkit-api"})
        return connection.getresponse()
    except BaseException:
        connection.close()
        raise


def _checked_address(host: str, port: int, allowed: frozenset[str], deadline: _Deadline) -> str:
    """The address to connect to: the first the name resolves to, refused if any is not public.

    The allow-list is matched against the host as the URL names it (not its addresses), so a
    listed host does not open the door to every other name that resolves to the same place.
    """
    deadline.remaining()
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UsageError(f"host {host!r} could not be resolved: {exc}") from None
    addresses = [str(info[4][0]) for info in infos]
    if _host_key(host) not in allowed:
        for address in addresses:
            if not _is_public(address):
                raise UsageError(
                    f"host {host!r} is at {address}, which is not a public address: it is not fetched",
                    hint="a server's operator can allow hosts with TRAINKIT_API_IMAGE_FETCH_ALLOWED_HOSTS",
                )
    return addresses[0]


def _is_public(address: str) -> bool:
    """Whether `address` is a global unicast address (not loopback, private, link-local, metadata...)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None and not _is_public(str(embedded)):
            return False
        if ip.ipv4_mapped is not None:
            return True
    return ip.is_global and not ip.is_multicast and not ip.is_reserved


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to the address already checked (no second lookup), under the deadline."""

    def __init__(self, host: str, port: int, address: str, deadline: _Deadline, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address
        self._deadline = deadline

    def connect(self) -> None:
        sock = socket.socket(socket.AF_INET6 if ":" in self._address else socket.AF_INET, socket.SOCK_STREAM)
        self._deadline.watch(sock)
        sock.settimeout(self._deadline.remaining())
        try:
            sock.connect((self._address, self.port))
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    """HTTPS to the checked address; the certificate is still checked against the host name."""

    default_port = 443

    def connect(self) -> None:
        super().connect()
        context = ssl.create_default_context()
        self.sock = context.wrap_socket(self.sock, server_hostname=self.host)
        self._deadline.watch(self.sock)


def _too_large(where: str, url: str, limits: ImageLimits) -> RemoteImageTooLarge:
    return RemoteImageTooLarge(
        f"{where}: {_shown(url)} is over the limit of {limits.max_bytes} bytes (TRAINKIT_IMAGE_MAX_BYTES)"
    )
