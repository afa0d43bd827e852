"""Image parts in datasets: each malformed one reported at its file and line; sync sends images by content."""

from __future__ import annotations

import base64
import io
import json
import os
import zlib
from pathlib import Path

import pytest
from PIL import Image

from trainkit_core.datasets.examples import parse_jsonl
from trainkit_core.datasets.images import ImageLimits, referenced_files
from trainkit_core.datasets.local import build_manifest, open_local
from trainkit_core.datasets.validate import check_local, validate_local

SPEC = 'name = "{name}"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'


def png(color: str = "red", size: tuple[int, int] = (8, 8)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image_line(*urls: str, text: str = "What is in the picture?", answer: str = "a red square") -> bytes:
    parts = [{"type": "text", "text": text}] + [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    record = {"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": answer}]}
    return json.dumps(record).encode() + b"\n"


def raw_line(messages: list[dict[str, object]]) -> bytes:
    return json.dumps({"messages": messages}).encode() + b"\n"


GOOD = image_line("images/ok.png", answer="first")


def bomb_png(width: int, height: int) -> bytes:
    """A valid PNG header claiming `width` x `height` with a tiny (zero) body: a decompression bomb's shape."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    rows = zlib.compress(b"\x00" * (1 + width) * 16)  # far fewer rows than claimed
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def make(tmp_path: Path, train: bytes, *, files: dict[str, bytes] | None = None, eval_: bytes | None = None) -> Path:
    folder = tmp_path / "pics"
    (folder / "images").mkdir(parents=True)
    (folder / "dataset.toml").write_text(SPEC.format(name="pics"))
    (folder / "images" / "ok.png").write_bytes(png())
    for rel, data in (files or {}).items():
        (folder / rel).write_bytes(data)
    (folder / "train.jsonl").write_bytes(train)
    (folder / "eval.jsonl").write_bytes(eval_ if eval_ is not None else image_line("images/ok.png", answer="held out"))
    return folder


def truncated_png() -> bytes:
    return png(size=(64, 64))[:60]


# (id, second line of train.jsonl, extra files, code, words in the message)
MALFORMED = [
    ("missing", image_line("images/nope.png"), {}, "image-missing", "images/nope.png"),
    ("remote-http", image_line("http://example.com/cat.png"), {}, "image-remote", "dataset folder"),
    ("remote-https", image_line("https://example.com/cat.png"), {}, "image-remote", "not fetched"),
    ("dotdot", image_line("../secret.png"), {}, "image-outside", "leads out"),
    ("absolute", image_line("/etc/passwd"), {}, "image-path", "relative to the dataset folder"),
    ("file-url", image_line("file:///etc/passwd"), {}, "image-path", "relative"),
    (
        "not-an-image",
        image_line("images/fake.png"),
        {"images/fake.png": b"hello, not a png"},
        "image-undecodable",
        "Pillow",
    ),
    (
        "truncated-png",
        image_line("images/cut.png"),
        {"images/cut.png": truncated_png()},
        "image-undecodable",
        "cut.png",
    ),
    ("bomb", image_line("images/bomb.png"), {"images/bomb.png": bomb_png(20000, 20000)}, "image-too-large", "pixels"),
    (
        "pixels-over",
        image_line("images/wide.png"),
        {"images/wide.png": bomb_png(4000, 3000)},
        "image-too-large",
        "TRAINKIT_IMAGE_MAX_PIXELS",
    ),
    (
        "junk-before-png",
        image_line("images/big.png"),
        {"images/big.png": os.urandom(16) + png(size=(8, 8))},
        "image-undecodable",
        "big.png",
    ),
    ("too-many", image_line(*["images/ok.png"] * 9), {}, "too-many-images", "9 images"),
    (
        "in-assistant",
        raw_line(
            [
                {"role": "user", "content": "describe"},
                {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "images/ok.png"}}]},
            ]
        ),
        {},
        "image-in-assistant",
        "not assistant",
    ),
    ("data-url-not-base64", image_line("data:image/png;base64,@@@@"), {}, "image-data-url", "base64"),
    ("data-url-wrong-mime", image_line(data_url(png(), "text/plain")), {}, "image-data-url", "text/plain"),
    ("data-url-garbage", image_line(data_url(b"GIF89a but not really")), {}, "image-undecodable", "data URL"),
    (
        "part-type-unknown",
        raw_line(
            [
                {"role": "user", "content": [{"type": "image", "image": "images/ok.png"}]},
                {"role": "assistant", "content": "a"},
            ]
        ),
        {},
        "part-type-unknown",
        "'image'",
    ),
    (
        "part-without-url",
        raw_line(
            [
                {"role": "user", "content": [{"type": "image_url", "image_url": {}}]},
                {"role": "assistant", "content": "a"},
            ]
        ),
        {},
        "part-image-invalid",
        "content[0]",
    ),
    (
        "part-empty-text",
        raw_line(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": " "},
                        {"type": "image_url", "image_url": {"url": "images/ok.png"}},
                    ],
                },
                {"role": "assistant", "content": "a"},
            ]
        ),
        {},
        "part-text-invalid",
        "content[0]",
    ),
    (
        "tiff",
        image_line("images/scan.tif"),
        {
            "images/scan.tif": (lambda b: (Image.new("RGB", (4, 4)).save(b, format="TIFF"), b.getvalue())[1])(
                io.BytesIO()
            )
        },
        "image-undecodable",
        "TIFF",
    ),
    ("folder-not-file", image_line("images"), {}, "image-not-file", "a folder"),
]


@pytest.mark.parametrize(("case", "bad", "files", "code", "words"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_image_dataset_is_reported_at_its_line(
    tmp_path: Path, case: str, bad: bytes, files: dict[str, bytes], code: str, words: str
) -> None:
    folder = make(tmp_path, GOOD + bad, files=files)
    limits = ImageLimits(max_pixels=10_000_000, max_bytes=1_000_000, max_per_example=8)
    report = validate_local(folder, image_limits=limits)
    errors = [(p.file, p.line, p.code) for p in report.errors]
    assert ("train.jsonl", 2, code) in errors, report.error_text()
    [problem] = [p for p in report.errors if p.code == code]
    assert words in problem.message
    assert report.train_examples == 1  # the good line stays, the bad one is left out
    assert not report.ok()


def test_the_byte_limit_is_a_setting(tmp_path: Path) -> None:
    folder = make(tmp_path, GOOD + image_line("images/big.png"), files={"images/big.png": png(size=(300, 300))})
    size = (folder / "images" / "big.png").stat().st_size
    assert validate_local(folder).ok()
    report = validate_local(folder, image_limits=ImageLimits(max_bytes=size - 1))
    [problem] = report.errors
    assert (problem.line, problem.code) == (2, "image-too-large")
    assert "TRAINKIT_IMAGE_MAX_BYTES" in problem.message


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.png"
    outside.write_bytes(png())
    folder = make(tmp_path, GOOD + image_line("images/link.png"))
    (folder / "images" / "link.png").symlink_to(outside)
    report = validate_local(folder)
    assert [(p.line, p.code) for p in report.errors] == [(2, "image-outside")]
    assert "link" in report.errors[0].message


def test_a_bad_image_in_the_eval_file_is_named_there(tmp_path: Path) -> None:
    folder = make(tmp_path, GOOD, eval_=image_line("images/ok.png", answer="x") + image_line("images/gone.png"))
    report = validate_local(folder)
    assert [(p.file, p.line, p.code) for p in report.errors] == [("eval.jsonl", 2, "image-missing")]


def test_good_images_validate_and_are_counted(tmp_path: Path) -> None:
    blue = data_url(png("blue"))
    train = GOOD + image_line("images/two.png", answer="second") + image_line(blue, answer="third")
    folder = make(tmp_path, train, files={"images/two.png": png("green")})
    checked = check_local(folder)
    assert checked.report.ok(), checked.report.error_text()
    assert checked.report.train_examples == 3
    assert checked.report.images == 4  # ok.png, two.png, the data URL; ok.png again in eval.jsonl
    assert "images" in checked.report.summary()
    record = checked.train[1].as_record()
    assert record["messages"][0]["content"][1] == {"type": "image_url", "image_url": {"url": "images/two.png"}}


def test_text_parts_alone_are_a_text_turn() -> None:
    line = raw_line(
        [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "c"},
        ]
    )
    [example], problems = parse_jsonl(line, "train.jsonl", "chat")
    assert problems == []
    assert example.messages[0] == ("user", "a\nb")


def test_the_manifest_holds_the_images_by_content(tmp_path: Path) -> None:
    folder = make(tmp_path, GOOD + image_line("images/two.png", answer="2"), files={"images/two.png": png("green")})
    assert referenced_files((folder / "train.jsonl").read_bytes()) == ["images/ok.png", "images/two.png"]
    manifest = build_manifest(folder)
    assert set(manifest.files) == {"dataset.toml", "train.jsonl", "eval.jsonl", "images/ok.png", "images/two.png"}
    assert open_local(folder).as_dict()["images"] == 2
    before = manifest.hash
    (folder / "images" / "two.png").write_bytes(png("yellow"))
    assert build_manifest(folder).hash != before  # a changed picture is a new version


def test_sync_sends_only_changed_images_and_the_job_reads_them(tmp_path: Path, trainkit_home: Path) -> None:
    from trainkit_core.datasets.reader import read_synced
    from trainkit_core.datasets.sync import sync_to_volume
    from trainkit_core.datasets.validate import validate_synced
    from trainkit_core.toolkit.folder_volume import FolderVolume

    volume = FolderVolume(trainkit_home / "volumes" / "trainkit-data")
    folder = make(tmp_path, GOOD + image_line("images/two.png", answer="2"), files={"images/two.png": png("green")})
    first = sync_to_volume(volume, folder)
    assert "images/two.png" in first.files_sent and "images/ok.png" in first.files_sent
    (folder / "images" / "two.png").write_bytes(png("yellow"))
    second = sync_to_volume(volume, folder)
    assert second.files_sent == ["images/two.png"]
    assert validate_synced(volume, "pics").images == 3
    data = read_synced(volume.root, "pics")
    url = data.train[1]["messages"][0]["content"][1]["image_url"]["url"]
    with Image.open(url) as picture:  # the job gets the synced blob's path
        assert picture.getpixel((0, 0)) == (255, 255, 0)


def test_the_plan_counts_each_images_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainkit_core import get_provider
    from trainkit_core.settings import Settings
    from trainkit_core.training.plan import make_plan

    datasets = tmp_path / "datasets"
    datasets.mkdir()
    folder = make(datasets, GOOD + image_line("images/ok.png", "images/ok.png", answer="two of them"))
    text = folder.parent / "plain"
    text.mkdir()
    (text / "dataset.toml").write_text('name = "plain"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    (text / "train.jsonl").write_bytes(
        raw_line([{"role": "user", "content": "What is in the picture?"}, {"role": "assistant", "content": "first"}])
        + raw_line(
            [{"role": "user", "content": "What is in the picture?"}, {"role": "assistant", "content": "two of them"}]
        )
    )
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(datasets))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    provider = get_provider("local", Settings.from_env())
    with_images = make_plan(provider, {"dataset": "pics", "model_size": "4b", "steps": 1}, exact=False)
    plain = make_plan(provider, {"dataset": "plain", "model_size": "4b", "steps": 1}, exact=False)
    assert with_images.tokens_per_epoch - plain.tokens_per_epoch == 3 * 260  # three images, 260 tokens each
    assert any("3 images in 2 examples" in note for note in with_images.notes)
    assert "tokens per image" in with_images.tokens_method
