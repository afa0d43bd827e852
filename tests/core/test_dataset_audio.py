"""Audio parts in datasets: each malformed one reported at its file and line; decoding and resampling; sync by content.

Sounds are made here with numpy and written by soundfile (WAV and MP3), the same
library that decodes them; hostile files are cut, mislabelled or not audio at all.
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile

from trainkit_core.datasets.audio import AudioLimits, decode_audio
from trainkit_core.datasets.images import ImageLimits, load_audio, referenced_files
from trainkit_core.datasets.local import build_manifest
from trainkit_core.datasets.validate import validate_local

SPEC = 'name = "{name}"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'


def tone(frequency: float = 440.0, seconds: float = 0.3, rate: int = 16_000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def encoded(samples: np.ndarray, rate: int = 16_000, fmt: str = "WAV", subtype: str | None = None) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, format=fmt, subtype=subtype)
    return buffer.getvalue()


def audio_line(*parts: dict[str, object], role: str = "user", answer: str = "a beep") -> bytes:
    content = [*parts, {"type": "text", "text": "What do you hear?"}]
    record = {"messages": [{"role": role, "content": content}, {"role": "assistant", "content": answer}]}
    return json.dumps(record).encode() + b"\n"


def path_part(path: str, **extra: object) -> dict[str, object]:
    return {"type": "input_audio", "input_audio": {"path": path, **extra}}


def data_part(data: bytes, fmt: str = "wav") -> dict[str, object]:
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}


GOOD = audio_line(path_part("audio/ok.wav"), answer="first")


def make(tmp_path: Path, train: bytes, *, files: dict[str, bytes] | None = None) -> Path:
    folder = tmp_path / "sounds"
    (folder / "audio").mkdir(parents=True)
    (folder / "dataset.toml").write_text(SPEC.format(name="sounds"))
    (folder / "audio" / "ok.wav").write_bytes(encoded(tone()))
    for rel, data in (files or {}).items():
        (folder / rel).write_bytes(data)
    (folder / "train.jsonl").write_bytes(train)
    (folder / "eval.jsonl").write_bytes(audio_line(data_part(encoded(tone(880.0), fmt="MP3"), "mp3"), answer="held"))
    return folder


LIMITS = ImageLimits(audio=AudioLimits(max_seconds=2.0, max_bytes=200_000, max_per_example=3))
WAV = encoded(tone())

# (id, second line of train.jsonl, extra files, code, words in the message)
MALFORMED = [
    ("missing-file", audio_line(path_part("audio/nope.wav")), {}, "audio-missing", "audio/nope.wav"),
    (
        "not-audio",
        audio_line(path_part("audio/fake.wav")),
        {"audio/fake.wav": b"hello, not a sound"},
        "audio-undecodable",
        "does not decode",
    ),
    ("truncated-wav", audio_line(data_part(WAV[:30])), {}, "audio-undecodable", "base64 audio"),
    ("wav-cut-mid-samples", audio_line(data_part(WAV[: len(WAV) // 2])), {}, "audio-undecodable", "cut short"),
    ("random-bytes", audio_line(data_part(os.urandom(4000))), {}, "audio-undecodable", "does not decode"),
    (
        "mp3-said-wav",
        audio_line(data_part(encoded(tone(), fmt="MP3"), "wav")),
        {},
        "audio-undecodable",
        "said to be wav, but the bytes are MP3",
    ),
    (
        "too-long",
        audio_line(path_part("audio/long.wav")),
        {"audio/long.wav": encoded(tone(seconds=3.0), rate=8000)},
        "audio-too-large",
        "TRAINKIT_AUDIO_MAX_SECONDS",
    ),
    (
        "too-many-bytes",
        audio_line(path_part("audio/big.wav")),
        {"audio/big.wav": encoded(tone(seconds=1.9, rate=48_000), rate=48_000, subtype="FLOAT")},
        "audio-too-large",
        "TRAINKIT_AUDIO_MAX_BYTES",
    ),
    ("too-many-parts", audio_line(*[path_part("audio/ok.wav")] * 4), {}, "too-many-audio", "4 audio parts"),
    (
        "in-assistant",
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [path_part("audio/ok.wav")]},
                ]
            }
        ).encode()
        + b"\n",
        {},
        "audio-in-assistant",
        "user or system",
    ),
    ("format-unknown", audio_line(data_part(WAV, "flac")), {}, "audio-format", "'flac' is not one of wav, mp3"),
    (
        "no-format-for-data",
        audio_line({"type": "input_audio", "input_audio": {"data": "UklGRg=="}}),
        {},
        "audio-format",
        'needs "format"',
    ),
    ("suffix-not-audio", audio_line(path_part("audio/ok.txt")), {}, "audio-format", "is not a .wav or .mp3 file"),
    (
        "suffix-disagrees",
        audio_line(path_part("audio/ok.wav", format="mp3")),
        {},
        "audio-format",
        "format 'mp3' but the file is .wav",
    ),
    ("dotdot", audio_line(path_part("../secret.wav")), {}, "audio-outside", "leads out"),
    ("absolute", audio_line(path_part("/etc/passwd.wav")), {}, "audio-path", "relative to the dataset folder"),
    ("url", audio_line(path_part("https://example.com/a.wav")), {}, "audio-path", "is a URL"),
    (
        "both-data-and-path",
        audio_line(
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav", "path": "audio/ok.wav"}}
        ),
        {},
        "part-audio-invalid",
        "one of them",
    ),
    (
        "not-an-object",
        audio_line({"type": "input_audio", "input_audio": "audio/ok.wav"}),
        {},
        "part-audio-invalid",
        "needs",
    ),
    (
        "bad-base64",
        audio_line({"type": "input_audio", "input_audio": {"data": "%%%not base64", "format": "wav"}}),
        {},
        "audio-data-url",
        "does not decode",
    ),
    ("folder-not-file", audio_line(path_part("audio/sub.wav")), {}, "audio-not-file", "a folder"),
    (
        "silence-of-nothing",
        audio_line(data_part(encoded(np.zeros(0, dtype=np.float32)))),
        {},
        "audio-undecodable",
        "no samples",
    ),
]


@pytest.mark.parametrize(("case", "bad", "files", "code", "words"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_audio_dataset_is_reported_at_its_line(
    tmp_path: Path, case: str, bad: bytes, files: dict[str, bytes], code: str, words: str
) -> None:
    folder = make(tmp_path, GOOD + bad, files=files)
    if case == "folder-not-file":
        (folder / "audio" / "sub.wav").mkdir()
    report = validate_local(folder, image_limits=LIMITS)
    errors = [(p.file, p.line, p.code) for p in report.errors]
    assert ("train.jsonl", 2, code) in errors, report.error_text()
    [problem] = [p for p in report.errors if p.code == code]
    assert words in problem.message, problem.message
    assert report.train_examples == 1  # the good line stays, the bad one is left out
    assert not report.ok()


def test_a_good_audio_dataset_counts_its_sounds_and_the_manifest_holds_them_by_content(tmp_path: Path) -> None:
    two = audio_line(path_part("audio/two.wav"), answer="second")
    folder = make(tmp_path, GOOD + two, files={"audio/two.wav": encoded(tone(660.0))})
    report = validate_local(folder, image_limits=LIMITS)
    assert report.ok(), report.error_text()
    assert (report.train_examples, report.eval_examples, report.audio) == (2, 1, 3)
    assert "3 audio parts" in report.summary()
    assert referenced_files((folder / "train.jsonl").read_bytes()) == ["audio/ok.wav", "audio/two.wav"]
    manifest = build_manifest(folder)
    assert {"audio/ok.wav", "audio/two.wav"} <= set(manifest.files)
    before = manifest.hash
    (folder / "audio" / "two.wav").write_bytes(encoded(tone(330.0)))
    assert build_manifest(folder).hash != before  # a changed sound is a new version


def _peak_hz(samples: np.ndarray, rate: int = 16_000) -> float:
    spectrum = np.abs(np.fft.rfft(samples))
    return float(np.argmax(spectrum) * rate / len(samples))


@pytest.mark.parametrize("rate", [8_000, 16_000, 22_050, 44_100, 48_000])
def test_sounds_reach_the_model_mono_at_16_khz_with_their_pitch(rate: int) -> None:
    stereo = np.stack([tone(440.0, 0.5, rate), tone(440.0, 0.5, rate)], axis=1)
    samples = decode_audio(encoded(stereo, rate), "wav", AudioLimits())
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(len(samples) - 8_000) <= 1  # half a second at 16 kHz
    assert abs(_peak_hz(samples) - 440.0) < 4.0
    assert 0.25 < float(np.abs(samples).max()) < 0.35  # the loudness kept


def test_mp3_decodes_and_a_high_tone_is_not_folded_into_the_band() -> None:
    samples = decode_audio(encoded(tone(1000.0, 0.5, 44_100), 44_100, fmt="MP3"), "mp3", AudioLimits())
    assert abs(_peak_hz(samples) - 1000.0) < 6.0
    # 12 kHz is above 16 kHz's Nyquist frequency: cut, not aliased to 4 kHz.
    high = decode_audio(encoded(tone(12_000.0, 0.5, 44_100), 44_100), "wav", AudioLimits())
    assert float(np.abs(high).max()) < 0.01


def test_the_job_reads_a_synced_sound_whose_name_lost_its_suffix(tmp_path: Path, trainkit_home: Path) -> None:
    from trainkit_core.datasets.reader import read_synced
    from trainkit_core.datasets.sync import sync_to_volume
    from trainkit_core.toolkit.folder_volume import FolderVolume

    volume = FolderVolume(trainkit_home / "volumes" / "trainkit-data")
    folder = make(tmp_path, GOOD)
    sent = sync_to_volume(volume, folder)
    assert "audio/ok.wav" in sent.files_sent
    data = read_synced(volume.root, "sounds")
    path = data.train[0]["messages"][0]["content"][0]["input_audio"]["path"]
    assert not path.endswith(".wav")  # the content-addressed blob
    assert abs(_peak_hz(load_audio(path)) - 440.0) < 4.0


def test_the_plan_counts_each_sounds_tokens_by_its_length(
    tmp_path: Path, trainkit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One token per 40 ms and two markers: 1.0 s (a file) is 27 tokens, 0.4 s (inline) 12."""
    from trainkit_core import get_provider
    from trainkit_core.settings import Settings
    from trainkit_core.training.plan import make_plan

    datasets = tmp_path / "datasets"
    folder = make(datasets, audio_line(path_part("audio/long.wav"), answer="first"), files={})
    (folder / "audio" / "long.wav").write_bytes(encoded(tone(seconds=1.0, rate=22_050), rate=22_050))
    with_sound = folder.parent / "inline"
    with_sound.mkdir()
    (with_sound / "dataset.toml").write_text('name = "inline"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    (with_sound / "train.jsonl").write_bytes(audio_line(data_part(encoded(tone(seconds=0.4))), answer="first"))
    plain = folder.parent / "plain"
    plain.mkdir()
    (plain / "dataset.toml").write_text('name = "plain"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    question = [{"type": "text", "text": "What do you hear?"}]
    (plain / "train.jsonl").write_text(
        json.dumps({"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": "first"}]})
        + "\n"
    )
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(datasets))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    provider = get_provider("local", Settings.from_env())

    def tokens(name: str) -> int:
        return make_plan(provider, {"dataset": name, "model_size": "e2b", "steps": 1}, exact=False).tokens_per_epoch

    assert tokens("sounds") - tokens("plain") == 27
    assert tokens("inline") - tokens("plain") == 12
    plan = make_plan(provider, {"dataset": "sounds", "model_size": "e2b", "steps": 1}, exact=False)
    assert any("27 audio tokens in 1 examples" in note for note in plan.notes), plan.notes
