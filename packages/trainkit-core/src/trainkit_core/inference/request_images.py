"""Images in a generation request: checked before any model is loaded, so a bad one is a 400, never a 500.

Why before: a request is validated where it arrives (the CLI, the API), and a picture
that does not decode, is not an image, or is a decompression bomb must be refused
there, naming its part, rather than fail inside a worker. Only ``data:image/...;base64``
URLs are taken here: a remote URL would make the server fetch from anywhere (and wait on
it; the API fetches only where its operator allows it, `trainkit_api.remote_images`),
and a path would read the server's own files. Pillow is imported only when a
request holds an image; where it is not installed (a light CLI) only the data URL's
form is checked here, and the API or the model's worker decodes the picture.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

from trainkit_core.datasets.images import ImageLimits, decode_data_url, open_image


def check_request_images(
    turns: list[dict[str, Any]], limits: ImageLimits | None = None, *, remote_ok: bool = False
) -> None:
    """`ValueError` naming the first bad image part of `turns` (OpenAI-form messages).

    `remote_ok` lets http(s) URLs pass, for a caller that fetches or refuses them next.
    """
    limits = limits or ImageLimits()
    for count, (where, turn, part) in enumerate(parts_of(turns, "image_url"), start=1):
        if turn["role"] == "assistant":
            raise ValueError(f"{where}: images go in user or system messages")
        if count > limits.max_per_example:
            raise ValueError(f"{where}: more than {limits.max_per_example} images in one request")
        url = part["image_url"]["url"]
        if url.lower().startswith(("http://", "https://")):
            if remote_ok:
                continue
            raise ValueError(f"{where}: remote image URLs are not fetched; send the image as a data: URL")
        try:
            mime, data = decode_data_url(url)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if importlib.util.find_spec("PIL") is None:
            continue  # a light client: the API or the model's worker decodes it (both have Pillow)
        try:
            open_image(data, limits)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if mime.split("/")[-1].replace("jpg", "jpeg") != str(image_format(data)).lower().replace("mpo", "jpeg"):
            raise ValueError(f"{where}: the data URL says {mime}, but the bytes are {image_format(data)}")


def parts_of(turns: list[dict[str, Any]], kind: str) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, message, part) of each part of type `kind` in `turns`, in order; `where` names it for an error."""
    for index, turn in enumerate(turns):
        content = turn["content"]
        if not isinstance(content, list):
            continue
        for position, part in enumerate(content):
            if part["type"] == kind:
                yield f"messages[{index}].content[{position}]", turn, part


def image_format(data: bytes) -> str | None:
    """Pillow's name of the format of `data` (already decoded by `open_image`): "MPO" is a phone's JPEG."""
    import io
    import warnings

    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `open_image` decoded these bytes under trainkit's limits
        with Image.open(io.BytesIO(data)) as image:
            return image.format
