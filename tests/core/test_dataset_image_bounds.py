"""Images of a dataset are bounded before they are read, and odd ones never crash.

A file over the byte limit is refused from its size (a sparse file of gigabytes takes no
disk, and must take no memory); a NUL byte in an image path is a problem at its file and
line, and the dataset list still works; Pillow's warnings are not printed; a phone's MPO
JPEG is a JPEG.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from trainkit_core.datasets.images import ImageLimits, load_image, read_image_file
from trainkit_core.datasets.local import build_manifest, list_local, open_local
from trainkit_core.datasets.validate import validate_local
from trainkit_core.inference.request import GenerateRequest

SPEC = 'name = "pics"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
GIB = 1024**3


def png(color: str = "red") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buffer, format="PNG")
    return buffer.getvalue()


def line(url: str, answer: str = "a red square") -> bytes:
    parts = [{"type": "text", "text": "What is in the picture?"}, {"type": "image_url", "image_url": {"url": url}}]
    record = {"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": answer}]}
    return json.dumps(record).encode() + b"\n"


def make(root: Path, second: bytes) -> Path:
    """A dataset `pics` whose train.jsonl has a good line, then `second`."""
    folder = root / "pics"
    (folder / "images").mkdir(parents=True)
    (folder / "dataset.toml").write_text(SPEC)
    (folder / "images" / "ok.png").write_bytes(png())
    (folder / "train.jsonl").write_bytes(line("images/ok.png", "first") + second)
    (folder / "eval.jsonl").write_bytes(line("images/ok.png", "held out"))
    return folder


def sparse(path: Path, size: int) -> Path:
    subprocess.run(["truncate", "-s", str(size), str(path)], check=True)
    assert path.stat().st_blocks * 512 < 1024 * 1024  # sparse: no disk taken
    return path


def peak_bytes(action: Callable[[], Any]) -> tuple[Any, int]:
    """What `action` returns, and the most memory Python allocated meanwhile."""
    tracemalloc.start()
    try:
        return action(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def problems(report: Any) -> list[tuple[str, int | None, str, str]]:
    return [(p.file, p.line, p.code, p.message) for p in report.problems]


# ----------------------------------------------------------------------- byte limit


def test_an_image_over_the_byte_limit_is_refused_from_its_size_unread(tmp_path: Path) -> None:
    folder = make(tmp_path, line("images/huge.png"))
    sparse(folder / "images" / "huge.png", 64 * 1024 * 1024)
    limits = ImageLimits(max_bytes=1024 * 1024)
    report, peak = peak_bytes(lambda: validate_local(folder, image_limits=limits))
    found = [p for p in problems(report) if p[2] == "image-too-large"]
    assert found and found[0][:2] == ("train.jsonl", 2), problems(report)
    assert "67108864 bytes" in found[0][3] and "1048576 (TRAINKIT_IMAGE_MAX_BYTES)" in found[0][3]
    assert peak < 16 * 1024 * 1024, peak  # the 64 MiB were never read
    # the listing hashes it in blocks (a file without a newline is never one huge "line")
    listed, peak = peak_bytes(lambda: open_local(folder).as_dict())
    assert listed["files"]["images/huge.png"]["size"] == 64 * 1024 * 1024 and peak < 16 * 1024 * 1024, peak


def test_a_sparse_file_of_3_gib_is_refused_by_size_with_the_default_limits(tmp_path: Path) -> None:
    folder = make(tmp_path, line("images/huge.png"))
    sparse(folder / "images" / "huge.png", 3 * GIB)
    report, peak = peak_bytes(lambda: validate_local(folder))
    found = [p for p in problems(report) if p[2] == "image-too-large"]
    assert found and f"{3 * GIB} bytes" in found[0][3] and "TRAINKIT_IMAGE_MAX_BYTES" in found[0][3], problems(report)
    assert peak < 64 * 1024 * 1024, peak


def test_the_job_side_load_refuses_a_huge_file_before_reading_it(tmp_path: Path) -> None:
    huge = sparse(tmp_path / "huge.png", 3 * GIB)
    with pytest.raises(ValueError, match="TRAINKIT_IMAGE_MAX_BYTES") as caught:
        peak_bytes(lambda: load_image(str(huge)))
    assert f"{3 * GIB} bytes" in str(caught.value)
    with pytest.raises(ValueError, match="over the limit of 1024 "):
        read_image_file(huge, 1024)


def test_a_fifo_is_refused_unopened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        read_image_file(fifo, 1024)  # opening it would wait for a writer forever


# ------------------------------------------------------------------------- NUL byte


@pytest.mark.parametrize(
    "url", ["images/ok\u0000.png", "\u0000", "images/a\nb.png"], ids=["nul", "only-nul", "newline"]
)
def test_a_control_character_in_an_image_path_is_a_problem_at_its_line(tmp_path: Path, url: str) -> None:
    folder = make(tmp_path / "datasets", line(url))
    report = validate_local(folder)
    found = [p for p in problems(report) if p[2] == "image-path"]
    assert found and found[0][:2] == ("train.jsonl", 2), problems(report)
    assert "control character" in found[0][3]
    # the listing of every dataset, and the manifest sync builds, still work
    (listed,) = list_local(tmp_path / "datasets")
    assert "problems" not in listed.as_dict(), listed.as_dict()
    assert set(build_manifest(folder).files) == {"dataset.toml", "train.jsonl", "eval.jsonl", "images/ok.png"}


# ------------------------------------------------------------------- Pillow's words


def test_validate_lets_no_pillow_warning_through(tmp_path: Path) -> None:
    palette = Image.new("P", (8, 8))
    palette.putpalette([0, 0, 0, 255, 0, 0] * 128)
    buffer = io.BytesIO()
    palette.save(buffer, "PNG", transparency=b"\x00\x80")  # Pillow warns when such a palette goes to RGB
    folder = make(tmp_path, line("images/palette.png"))
    (folder / "images" / "palette.png").write_bytes(buffer.getvalue())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = validate_local(folder)
    assert report.ok(), problems(report)
    assert [str(w.message) for w in caught if "PIL" in w.filename or "Pillow" in str(w.message)] == []


def test_the_pixel_limit_is_trainkits_not_pillows_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over Pillow's MAX_IMAGE_PIXELS (but under twice it) Pillow only warns: trainkit's limit decides."""
    from trainkit_core.datasets.images import open_image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    buffer = io.BytesIO()
    Image.new("RGB", (40, 40), "red").save(buffer, format="PNG")  # 1600 pixels: Pillow warns
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert open_image(buffer.getvalue(), ImageLimits(max_pixels=10_000)).size == (40, 40)
        with pytest.raises(ValueError, match=r"40x40 pixels is over the limit of 1500 \(TRAINKIT_IMAGE_MAX_PIXELS\)"):
            open_image(buffer.getvalue(), ImageLimits(max_pixels=1500))
    assert [str(w.message) for w in caught] == []


# ------------------------------------------------------------------------------ MPO


def mpo() -> bytes:
    first, second = Image.new("RGB", (16, 16), "red"), Image.new("RGB", (16, 16), "blue")
    buffer = io.BytesIO()
    first.save(buffer, "MPO", save_all=True, append_images=[second])
    assert Image.open(io.BytesIO(buffer.getvalue())).format == "MPO"
    return buffer.getvalue()


def test_an_mpo_jpeg_from_a_phone_is_accepted_in_a_dataset(tmp_path: Path) -> None:
    folder = make(tmp_path, line("images/phone.jpg"))
    (folder / "images" / "phone.jpg").write_bytes(mpo())
    report = validate_local(folder)
    assert report.ok(), problems(report)
    red, _, blue = load_image(str(folder / "images" / "phone.jpg")).getpixel((8, 8))
    assert red > 200 and blue < 60  # the first frame: the picture, not the second


def test_an_mpo_jpeg_is_accepted_in_a_generation_request() -> None:
    import base64

    url = "data:image/jpeg;base64," + base64.b64encode(mpo()).decode()
    request = GenerateRequest.parse(
        {"model_path": "trained/run-20260101-000000-abcdef", "prompt": "hi", "images": [url]}
    )
    assert request.has_images
