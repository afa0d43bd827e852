"""Generate ``datasets/tones``: short sounds an audio model learns to describe (pitch and count).

Each sound is one, two or three beeps of a pitch (low, middle or high: around 220, 440
and 880 Hz, each drawn a few per cent off) with random lengths, gaps, loudness and a
little noise, at a random sample rate (16, 22.05 or 44.1 kHz), asked about as "What do
you hear?" and answered "two high beeps". The eval sounds are other random draws, so an
exact match on eval shows the model hears the sound, not a memorised file. Training
sounds are WAV files in ``audio/``; the eval sounds are given inline, as base64 MP3
(OpenAI's ``input_audio`` form), so both forms are exercised. Two more sounds,
``audio/unseen-high-2.wav`` and ``audio/unseen-low-3.wav``, are in no line: to try
``trainkit infer --audio`` on.

Run ``python scripts/make_tones_dataset.py [FOLDER]`` to (re)write the folder; the
output is the same on every run (seeded). Needs numpy and soundfile (trainkit-core[train]).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
from pathlib import Path

PITCHES = {"low": 220.0, "middle": 440.0, "high": 880.0}
COUNTS = {1: "one", 2: "two", 3: "three"}
QUESTION = "What do you hear?"
RATES = (16_000, 22_050, 44_100)


def answer(pitch: str, count: int) -> str:
    return f"{COUNTS[count]} {pitch} beep" + ("s" if count > 1 else "")


def sound(pitch: str, count: int, rng: random.Random) -> tuple[object, int]:
    """(samples, rate) of `count` beeps of `pitch`."""
    import numpy as np

    rate = rng.choice(RATES)
    frequency = PITCHES[pitch] * rng.uniform(0.94, 1.06)
    pieces = [np.zeros(int(rate * rng.uniform(0.05, 0.2)))]
    for _ in range(count):
        length = int(rate * rng.uniform(0.12, 0.3))
        t = np.arange(length) / rate
        envelope = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)  # 10 ms ramps: no clicks
        pieces.append(rng.uniform(0.2, 0.6) * envelope * np.sin(2 * np.pi * frequency * t))
        pieces.append(np.zeros(int(rate * rng.uniform(0.08, 0.2))))
    samples = np.concatenate(pieces)
    noise = np.random.default_rng(rng.randrange(2**32)).normal(0.0, 0.01, len(samples))
    return (samples + noise).astype(np.float32), rate


def encode(samples: object, rate: int, fmt: str) -> bytes:
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, format=fmt.upper())
    return buffer.getvalue()


def example(part: dict[str, object], pitch: str, count: int) -> dict[str, object]:
    return {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": QUESTION}, part]},  # as `infer --prompt --audio` asks
            {"role": "assistant", "content": answer(pitch, count)},
        ]
    }


def write(folder: Path, train_per_class: int = 40, eval_per_class: int = 3, seed: int = 0) -> Path:
    """Write the dataset into `folder` (created); 9 classes of `train_per_class` and `eval_per_class` sounds."""
    rng = random.Random(seed)
    (folder / "audio").mkdir(parents=True, exist_ok=True)
    classes = [(pitch, count) for pitch in PITCHES for count in COUNTS]
    train, held_out = [], []
    for pitch, count in classes:
        for i in range(train_per_class):
            name = f"audio/train-{pitch}-{count}-{i:03d}.wav"
            samples, rate = sound(pitch, count, rng)
            (folder / name).write_bytes(encode(samples, rate, "wav"))
            train.append(example({"type": "input_audio", "input_audio": {"path": name}}, pitch, count))
        for _ in range(eval_per_class):
            samples, rate = sound(pitch, count, rng)
            data = base64.b64encode(encode(samples, rate, "mp3")).decode()
            held_out.append(
                example({"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}}, pitch, count)
            )
    for pitch, count in (("high", 2), ("low", 3)):  # to try `trainkit infer --audio` on: in no JSONL line
        samples, rate = sound(pitch, count, rng)
        (folder / "audio" / f"unseen-{pitch}-{count}.wav").write_bytes(encode(samples, rate, "wav"))
    random.Random(seed + 1).shuffle(train)
    (folder / "train.jsonl").write_text("".join(json.dumps(e) + "\n" for e in train))
    (folder / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in held_out))
    (folder / "dataset.toml").write_text(
        'name = "tones"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="datasets/tones", type=Path)
    parser.add_argument("--train-per-class", type=int, default=40)
    parser.add_argument("--eval-per-class", type=int, default=3)
    args = parser.parse_args()
    folder = write(args.folder, args.train_per_class, args.eval_per_class)
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()
