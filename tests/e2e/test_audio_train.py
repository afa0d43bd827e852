"""The E twin (Gemma 4 E2B/E4B's layout, with an audio tower) through the audio path from the CLI on `local`.

A small generated tones dataset (`scripts/make_tones_dataset.py`: one to three beeps of
a low, middle or high pitch; WAV files to train, base64 MP3 to evaluate) is validated and
synced; `tiny-gemma4-e` trains on it with the preset's defaults (LoRA, and its random audio
tower in full); the run proves its loss mask on the processor's output, scores the eval
sounds base against tuned, and leaves the processor (with its audio feature extractor)
beside the adapter, so that inference answers about a sound it never heard.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_env import Env, load_script

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(1800)]

TRAIN_PER_CLASS, EVAL_PER_CLASS = 20, 2


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    datasets = tmp_path_factory.mktemp("datasets")
    load_script("make_tones_dataset").write(
        datasets / "tones", train_per_class=TRAIN_PER_CLASS, eval_per_class=EVAL_PER_CLASS
    )
    env = Env(tmp_path_factory.mktemp("home"), datasets)
    yield env
    env.end_warm_worker()  # the warm inference worker `infer` started


@pytest.fixture(scope="module")
def trained(env: Env) -> dict[str, Any]:
    done = env.cli("train", "--dataset", "tones", "--model-size", "tiny-gemma4-e", "--json")
    record = json.loads(done.stdout)
    assert record["status"] == "succeeded", record
    return record


def test_validate_and_sync_count_the_sounds(env: Env) -> None:
    report = json.loads(env.cli("validate", "tones", "--local", "--json").stdout)
    classes = 9
    assert report["ok"] and report["audio"] == classes * (TRAIN_PER_CLASS + EVAL_PER_CLASS)
    listing = json.loads(env.cli("datasets", "--json").stdout)
    [tones] = [d for d in (listing if isinstance(listing, list) else listing["datasets"]) if d["name"] == "tones"]
    assert (tones["audio"], tones["images"]) == (classes * TRAIN_PER_CLASS, 0)  # the eval sounds are inline


def test_models_without_an_audio_tower_refuse_the_dataset_before_anything_runs(env: Env) -> None:
    for size, words in (
        ("tiny-gemma4", "has no audio tower"),
        ("tiny", "has no audio tower"),
        ("4b", "has no audio tower"),
    ):
        done = env.cli("train", "--dataset", "tones", "--model-size", size, "--steps", "1", check=False)
        assert done.returncode != 0 and words in done.stderr, (size, done.stderr)
    done = env.cli("train", "--dataset", "tones", "--model-size", "tiny-gemma4-e", "--packing", check=False)
    assert done.returncode != 0 and "has audio; --packing packs text only" in done.stderr, done.stderr
    runs = json.loads(env.cli("runs", "list", "--json").stdout)
    assert not (runs if isinstance(runs, list) else runs.get("runs", runs.get("data", []))), (
        "a refused run left a record"
    )


def test_the_e_twin_learns_to_describe_sounds_it_never_heard(trained: dict[str, Any]) -> None:
    metrics = trained["metrics"]
    print({k: metrics[k] for k in ("eval_exact_match", "eval_f1", "train_runtime_s") if k in metrics})
    # Chance is 1 in 9 on the exact answer; the base model says nothing of the kind.
    assert metrics["base_eval_exact_match"] == 0.0, metrics
    assert metrics["eval_f1"] >= 0.6 and metrics["eval_exact_match"] >= 0.25, metrics
    assert metrics["eval_end_of_turn_rate"] == 1.0, metrics


def test_the_processor_is_kept_and_the_tower_trains_only_when_asked(env: Env, trained: dict[str, Any]) -> None:
    from safetensors import safe_open

    def saved(run_id: str) -> list[str]:
        out = env.home / "volumes" / "trainkit-models" / "trained" / run_id
        processor = json.loads((out / "processor_config.json").read_text())
        assert processor["feature_extractor"]["sampling_rate"] == 16_000
        with safe_open(str(out / "adapter_model.safetensors"), "pt") as adapter:
            return list(adapter.keys())

    assert not any(".audio_tower." in name for name in saved(trained["id"]))  # frozen by default
    args = ("train", "--dataset", "tones", "--model-size", "tiny-gemma4-e", "--steps", "2", "--save-every", "2")
    asked = json.loads(env.cli(*args, "--finetune-audio-layers", "--json").stdout)
    names = saved(asked["id"])
    assert any(".audio_tower." in name for name in names) and any(".embed_audio." in name for name in names)
    events = env.cli("runs", "logs", trained["id"], "--json").stdout  # one JSON object per line
    assert "loss mask checked on the processor" in events, "the run did not prove its loss mask on the processor"


def test_a_sound_gets_an_answer_from_the_trained_model(env: Env, trained: dict[str, Any], tmp_path: Path) -> None:
    import random

    tones = load_script("make_tones_dataset")
    samples, rate = tones.sound("high", 2, random.Random(12345))
    wav = tmp_path / "two-high.wav"
    wav.write_bytes(tones.encode(samples, rate, "wav"))
    args = ("infer", "--model-path", f"trained/{trained['id']}", "--prompt", tones.QUESTION, "--audio", str(wav))
    answer = json.loads(env.cli(*args, "--max-new-tokens", "24", "--json").stdout)
    assert re.fullmatch(r"(one|two|three) (low|middle|high) beeps?", answer["text"].strip()), answer
    assert answer["usage"]["prompt_tokens"] > 20  # the sound's tokens are in the prompt
    not_audio = env.cli("infer", "--model-path", f"trained/{trained['id']}", "--audio", __file__, check=False)
    assert not_audio.returncode != 0 and "--audio" in not_audio.stderr


def test_eval_scores_the_sounds_and_the_report_names_them(env: Env, trained: dict[str, Any]) -> None:
    report = json.loads(env.cli("eval", "run", "--model-path", f"trained/{trained['id']}", "--json").stdout)
    shown = json.loads(env.cli("eval", "show", report["report_id"], "--examples", "--json").stdout)
    assert shown["tuned"]["examples"] == 9 * EVAL_PER_CLASS
    assert shown["tuned"]["exact_match"] > shown["base"]["exact_match"], shown
    parts = shown["examples"][0]["messages"][0]["content"]
    assert any(p.get("type") == "text" and p["text"].startswith("[audio, ") for p in parts), parts
