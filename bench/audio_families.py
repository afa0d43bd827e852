"""Audio defaults on more than the demo: the E twin on two families of generated sounds, tower frozen or trained.

Families (each answered in a closed set of phrases, with eval sounds drawn apart):

- ``tones``: the tones demo (`scripts/make_tones_dataset.py`): one to three beeps of a low,
  middle or high pitch (9 classes, 360 training sounds).
- ``sweeps``: a tone that rises or falls, or a hiss, loud or quiet (6 classes, 300
  training sounds): pitch over time and loudness, which the demo never asks.

Each is trained with ``trainkit train --dataset NAME --model-size tiny-gemma4-e`` and the
options of a variant; the run's own end-of-training eval gives exact match and F1 on the
eval sounds. Prints one row per family and variant, and the worst family per variant.
Run by hand (minutes on a CPU): ``python bench/audio_families.py [--variants frozen,trained]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {"frozen": [], "trained": ["--finetune-audio-layers"]}


def write_sweeps(folder: Path, train_per_class: int = 50, eval_per_class: int = 5, seed: int = 7) -> None:
    import numpy as np
    import soundfile

    rng = random.Random(seed)
    (folder / "audio").mkdir(parents=True, exist_ok=True)

    def make(kind: str, level: str) -> bytes:
        rate = rng.choice((16_000, 22_050, 44_100))
        n = int(rate * rng.uniform(0.5, 1.2))
        amplitude = rng.uniform(0.4, 0.7) if level == "loud" else rng.uniform(0.03, 0.08)
        noise = np.random.default_rng(rng.randrange(2**32))
        if kind == "hiss":
            x = noise.normal(0, amplitude / 2, n)
        else:
            low, high = rng.uniform(250, 400), rng.uniform(900, 1400)
            start, end = (low, high) if kind == "rising" else (high, low)
            x = amplitude * np.sin(2 * np.pi * np.cumsum(np.linspace(start, end, n)) / rate)
        buffer = io.BytesIO()
        soundfile.write(buffer, (x + noise.normal(0, 0.005, n)).astype(np.float32), rate, format="WAV")
        return buffer.getvalue()

    def line(path: str, kind: str, level: str) -> str:
        answer = f"a {level} hiss" if kind == "hiss" else f"a {level} {kind} sound"
        question = [
            {"type": "text", "text": "Describe the sound."},
            {"type": "input_audio", "input_audio": {"path": path}},
        ]
        return json.dumps(
            {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]}
        )

    train_lines: list[str] = []
    held_out: list[str] = []
    for kind in ("rising", "falling", "hiss"):
        for level in ("loud", "quiet"):
            for split, count, lines in (("train", train_per_class, train_lines), ("eval", eval_per_class, held_out)):
                for i in range(count):
                    path = f"audio/{split}-{kind}-{level}-{i:03d}.wav"
                    (folder / path).write_bytes(make(kind, level))
                    lines.append(line(path, kind, level))
    random.Random(seed + 1).shuffle(train_lines)
    (folder / "train.jsonl").write_text("\n".join(train_lines) + "\n")
    (folder / "eval.jsonl").write_text("\n".join(held_out) + "\n")
    (folder / "dataset.toml").write_text(
        'name = "sweeps"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )


def write_tones(folder: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_tones_dataset", REPO / "scripts" / "make_tones_dataset.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write(folder)


def train(env: dict[str, str], dataset: str, options: list[str]) -> dict[str, float]:
    args = ["train", "--dataset", dataset, "--model-size", "tiny-gemma4-e", *options, "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", *args], env=env, capture_output=True, text=True, check=True
    )
    metrics = json.loads(done.stdout)["metrics"]
    return {k: metrics[k] for k in ("eval_exact_match", "eval_f1", "train_runtime_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="frozen,trained", help=f"comma-separated, of {', '.join(VARIANTS)}")
    variants = parser.parse_args().variants.split(",")
    with tempfile.TemporaryDirectory(prefix="audio-families-") as scratch:
        root = Path(scratch)
        write_tones(root / "datasets" / "tones")
        write_sweeps(root / "datasets" / "sweeps")
        env = {
            **os.environ,
            "TRAINKIT_HOME": str(root / "home"),
            "TRAINKIT_DATASETS_DIR": str(root / "datasets"),
            "HF_HUB_OFFLINE": "1",
        }
        print("| variant | family | exact match | F1 | train s |\n|---|---|---|---|---|")
        worst: dict[str, float] = {}
        for variant in variants:
            for family in ("tones", "sweeps"):
                scores = train(env, family, VARIANTS[variant])
                worst[variant] = min(worst.get(variant, 1.0), scores["eval_exact_match"])
                print(
                    f"| {variant} | {family} | {scores['eval_exact_match']:.2f} | {scores['eval_f1']:.2f} "
                    f"| {scores['train_runtime_s']:.0f} |",
                    flush=True,
                )
        print("worst family, exact match:", json.dumps(worst))


if __name__ == "__main__":
    main()
