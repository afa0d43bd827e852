"""Unsloth's vision path on a CPU: a twin trains on pictures through `trainkit train --backend unsloth` (the `unsloth` session only).

On a CPU, Unsloth 2026.10 refuses `FastVisionModel` ("vision / audio models are not
supported on the CPU backend yet") but its `FastModel` loads the twin as its real class
(`Gemma3ForConditionalGeneration`), so the image path runs through the branch the real
presets take: trainkit's collator on the processor's output, `FastModel.get_peft_model`
with Unsloth's `finetune_vision_layers` switch, the LoRA targets Unsloth's GPU path
would choose for it (`training.backends.unsloth_target_pattern`), then `trainkit infer
--image` on the adapter. The adapter is read to check that it holds what the switch
says: with it, LoRA on the SigLIP tower (trained: its B matrices moved off zero) and the
projector in full; without it, nothing of either.

The Gemma 4 twin needs Gemma 4's processor, which the transformers Unsloth allows
(<= 5.17) imports together with torchvision; torchvision has no CPU build on these
machines, so that run ends with trainkit's error saying so (and trains, where
torchvision loads).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_env import Env
from test_train_unsloth import gemma4_processor_loads

pytestmark = [pytest.mark.ml, pytest.mark.unsloth, pytest.mark.e2e, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
QUESTION = "What is in the picture?"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    pytest.importorskip("unsloth")
    spec = importlib.util.spec_from_file_location("make_shapes_dataset", REPO / "scripts" / "make_shapes_dataset.py")
    assert spec and spec.loader
    shapes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shapes)
    datasets = tmp_path_factory.mktemp("datasets")
    shapes.write(datasets / "shapes", train_per_class=1, eval_per_class=1)
    env = Env(tmp_path_factory.mktemp("home"), datasets)
    yield env
    from conftest import _end_leftover_processes

    _end_leftover_processes(env.home)  # the warm inference worker `infer` started


def _train(env: Env, size: str, *extra: str) -> subprocess.CompletedProcess[str]:
    # No warm-up: the preset's 20 would keep the learning rate near zero for these few steps.
    args = ["train", "--dataset", "shapes", "--model-size", size, "--steps", "4", "--warmup-steps", "0"]
    return env.cli(*args, "--backend", "unsloth", "--json", *extra, check=False)


@pytest.fixture(scope="module", params=["vision-on", "vision-off"])
def trained(request: pytest.FixtureRequest, env: Env) -> dict[str, Any]:
    switch = [] if request.param == "vision-on" else ["--no-finetune-vision-layers"]
    done = _train(env, "tiny-gemma3mm", *switch)
    print(env.logs()[-4000:])  # what Unsloth printed, for the session's output
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout)
    assert record["status"] == "succeeded", record["error_message"]
    out = env.home / "volumes" / "trainkit-models" / "trained" / record["id"]
    return {"vision": request.param == "vision-on", "record": record, "out": out}


def test_unsloth_trains_the_gemma3_twin_on_pictures(trained: dict[str, Any]) -> None:
    record = trained["record"]
    assert record["framework"] == "unsloth"
    assert record["config"]["finetune_vision_layers"] is trained["vision"]
    assert record["metrics"]["train_examples"] == 9 and record["metrics"]["steps"] == 4
    card = json.loads((trained["out"] / "trained_model.json").read_text())
    assert card["backend"] == "unsloth" and "unsloth" in card["versions"]
    # The processor travels with the adapter: what `infer --image` resizes pictures with.
    assert any((trained["out"] / name).is_file() for name in ("processor_config.json", "preprocessor_config.json"))


def test_the_adapter_holds_what_finetune_vision_layers_says(trained: dict[str, Any]) -> None:
    from safetensors import safe_open

    with safe_open(str(trained["out"] / "adapter_model.safetensors"), "pt") as weights:
        tensors = {key: weights.get_tensor(key) for key in weights.keys()}  # noqa: SIM118  (safe_open is no dict)
    tower = [k for k in tensors if ".vision_tower." in k]
    projector = [k for k in tensors if ".multi_modal_projector." in k]
    language = [k for k in tensors if ".language_model." in k and "lora_B" in k]
    assert language and any(tensors[k].abs().sum() > 0 for k in language)  # the language LoRA trained
    if not trained["vision"]:
        assert not tower and not projector
        return
    # Unsloth's switch: LoRA on the SigLIP tower's attention and MLP, never its weights in full.
    assert tower and all(".lora_A." in k or ".lora_B." in k for k in tower), tower[:5]
    assert {k.split(".lora_")[0].rsplit(".", 1)[-1] for k in tower} == {
        "q_proj",
        "k_proj",
        "v_proj",
        "out_proj",
        "fc1",
        "fc2",
    }
    assert any(tensors[k].abs().sum() > 0 for k in tower if ".lora_B." in k)  # moved off its zero start
    # The projector, which no LoRA reaches (a weight matrix), in full: started at zero in the twin.
    [projection] = [k for k in projector if k.endswith("mm_input_projection_weight")]
    assert tensors[projection].abs().sum() > 0


def test_infer_answers_about_a_picture_with_the_unsloth_adapter(trained: dict[str, Any], env: Env) -> None:
    image = env.datasets / "shapes" / "images" / "eval-red-circle-000.png"
    model = f"trained/{trained['record']['id']}"
    base = ("infer", "--model-path", model, "--prompt", QUESTION, "--max-new-tokens", "6", "--json")
    with_image = env.cli(*base, "--image", str(image), check=False)
    assert with_image.returncode == 0, with_image.stderr[-3000:]
    without = env.cli(*base, check=False)
    assert without.returncode == 0, without.stderr[-3000:]
    seen, unseen = json.loads(with_image.stdout), json.loads(without.stdout)
    assert isinstance(seen["text"], str)
    # The picture's tokens are in the prompt (the tiny twin's processor gives 20 per image).
    assert seen["usage"]["prompt_tokens"] >= unseen["usage"]["prompt_tokens"] + 20


def test_the_gemma4_twin_trains_on_pictures_or_says_what_is_missing(env: Env) -> None:
    done = _train(env, "tiny-gemma4")
    if gemma4_processor_loads():
        assert done.returncode == 0, done.stderr[-3000:]
        record = json.loads(done.stdout)
        assert record["status"] == "succeeded" and record["framework"] == "unsloth", record["error_message"]
        return
    assert done.returncode != 0
    record = json.loads(done.stdout)
    message = record["error_message"] or ""
    assert record["status"] == "failed"
    assert "Gemma 4's processor cannot be loaded" in message and "torchvision" in message, message
