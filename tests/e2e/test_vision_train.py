"""Both vision twins through the image path from the CLI on the `local` provider.

A small generated shapes dataset (`scripts/make_shapes_dataset.py`) is synced and
validated, then each twin trains on it with the hf backend for a few steps; the run
proves its loss mask on the processor's output, trains the vision tower and projector
beside LoRA, scores the eval pictures base vs tuned, and leaves the processor with the
adapter.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_env import Env, load_script

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(1800)]

TWINS = {"tiny-gemma3mm": "gemma3", "tiny-gemma4": "gemma4"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    datasets = tmp_path_factory.mktemp("datasets")
    load_script("make_shapes_dataset").write(datasets / "shapes", train_per_class=2, eval_per_class=1)
    env = Env(tmp_path_factory.mktemp("home"), datasets)
    yield env
    env.end_warm_worker()  # the warm inference worker `infer` started


@pytest.fixture(scope="module", params=list(TWINS))
def trained(request: pytest.FixtureRequest, env: Env) -> dict[str, Any]:
    size = request.param
    done = env.cli("train", "--dataset", "shapes", "--model-size", size, "--steps", "4", "--save-every", "4")
    found = re.search(r"model: (trained/run-\S+)", done.stdout)
    assert found, done.stdout
    run_id = found.group(1).split("/", 1)[1]
    from trainkit_core import get_provider
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    provider = get_provider("local", Settings(provider=ProviderSettings(home=env.home), datasets=DatasetSettings()))
    run = RunStore.for_provider(provider).get(run_id)
    return {"size": size, "run": run, "out": Path(provider.volume("models").root) / "trained" / run_id, "env": env}


def test_sync_and_validate_count_the_images(env: Env) -> None:
    done = env.cli("validate", "shapes", "--local", "--json")
    report = json.loads(done.stdout)
    assert report["ok"] and report["images"] == 18 + 9
    listing = json.loads(env.cli("datasets", "--json").stdout)
    [shapes] = [d for d in (listing if isinstance(listing, list) else listing["datasets"]) if d["name"] == "shapes"]
    assert shapes["images"] == 27


def test_a_text_only_model_refuses_an_image_dataset_before_anything_runs(env: Env) -> None:
    done = env.cli("train", "--dataset", "shapes", "--model-size", "tiny", "--steps", "1", check=False)
    assert done.returncode != 0
    assert "has images" in done.stderr and "text-only" in done.stderr
    assert "run-" not in done.stdout  # no run was created


def test_the_twin_trains_on_images_with_its_mask_checked(trained: dict[str, Any]) -> None:
    run = trained["run"]
    assert run.status == "succeeded", run.error_message
    checks = [e for e in run.events.read() if e.get("message") == "loss mask checked on the processor's output"]
    assert checks and checks[0]["chat_format"] == TWINS[trained["size"]]
    assert run.config["finetune_vision_layers"] is True
    metrics = run.metrics
    assert metrics["eval_examples"] == 9 and metrics["base_eval_examples"] == 9
    assert metrics["gate_effect_max_abs_diff"] > metrics["gate_effect_minimum"]


def test_the_vision_tower_and_projector_are_saved_with_the_adapter(trained: dict[str, Any]) -> None:
    from safetensors import safe_open

    with safe_open(str(trained["out"] / "adapter_model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    assert any(".vision_tower." in k for k in keys)
    projector = "multi_modal_projector" if trained["size"] == "tiny-gemma3mm" else "embed_vision"
    assert any(projector in k for k in keys)
    assert not [k for k in keys if "lora_" in k and "vision" in k]  # LoRA stays on the language model
    checkpoint = trained["out"] / "checkpoints" / "00000004"
    for folder in (trained["out"], checkpoint):  # the adapter and its checkpoint both keep the processor
        assert any((folder / name).is_file() for name in ("preprocessor_config.json", "processor_config.json")), folder


def _image_file(env: Env) -> Path:
    return Path(env.env["TRAINKIT_DATASETS_DIR"]) / "shapes" / "images" / "eval-red-circle-000.png"


def test_infer_answers_about_an_image_and_keeps_the_processor_warm(trained: dict[str, Any]) -> None:
    env, run = trained["env"], trained["run"]
    image = str(_image_file(env))
    args = ("infer", "--model-path", f"trained/{run.id}", "--prompt", "What is in the picture?", "--image", image)
    first = json.loads(env.cli(*args, "--max-new-tokens", "8", "--json").stdout)
    again = json.loads(env.cli(*args, "--max-new-tokens", "8", "--json").stdout)
    assert first["text"] == again["text"] and again["cached"] is True  # greedy, and the warm worker kept it all
    trained["served"] = first["text"]  # what the export must answer too
    assert first["usage"]["prompt_tokens"] > 20  # the picture's tokens are in the prompt
    text_only = env.cli("infer", "--model-path", f"trained/{run.id}", "--image", __file__, "--prompt", "x", check=False)
    assert text_only.returncode != 0 and "not a PNG, JPEG" in text_only.stderr


def test_eval_scores_the_image_examples_and_keeps_their_pictures(trained: dict[str, Any]) -> None:
    env, run = trained["env"], trained["run"]
    report = json.loads(env.cli("eval", "run", "--model-path", f"trained/{run.id}", "--json").stdout)
    shown = json.loads(env.cli("eval", "show", report["report_id"], "--examples", "--json").stdout)
    assert shown["tuned"]["examples"] == 9 and shown["base"]["examples"] == 9
    first = shown["examples"][0]
    parts = first["messages"][0]["content"]
    [picture] = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert picture.startswith("data:image/png;base64,")  # the dashboard shows it beside the answers
    assert first["reference"].startswith("a ") and "answer" in first["tuned"]


BARE_IMAGE_GENERATE = """
import importlib.util, json
blocked = [n for n in ("peft", "trainkit_core", "trainkit_cli", "trl") if importlib.util.find_spec(n) is not None]
assert not blocked, f"importable in the bare environment: {blocked}"
import torch
from transformers import AutoModelForImageTextToText
folder, inputs_file, max_new = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = AutoModelForImageTextToText.from_pretrained(folder).eval()
inputs = torch.load(inputs_file)
with torch.inference_mode():
    out = model.generate(**inputs, max_new_tokens=max_new, do_sample=False)
new = out[0, inputs["input_ids"].shape[1]:].tolist()
print(json.dumps({"class": type(model).__name__, "new": new}))
"""


def test_the_merged_export_keeps_the_towers_and_answers_like_infer_without_trainkit(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    import torch

    from trainkit_core.datasets.vision_collator import image_placeholder, render_with_images
    from trainkit_core.inference.request import GenerateRequest
    from trainkit_core.models.processors import load_processor

    sys.path.insert(0, str(Path(__file__).parent))
    import bare_env

    env, run = trained["env"], trained["run"]
    out = tmp_path / "merged"
    env.cli("export", f"trained/{run.id}", "--merged", str(out), "--json")
    model_type = json.loads((out / "config.json").read_text())["model_type"]
    processor = load_processor(out, model_type=model_type)
    assert processor is not None, "the export lost its processor files"
    request = GenerateRequest.parse(
        {
            "model_path": f"trained/{run.id}",
            "prompt": "What is in the picture?",
            "images": [json.loads(json.dumps(_data_url(_image_file(env))))],
        }
    )
    fmt = "gemma3" if model_type == "gemma3" else "gemma4"
    from trainkit_core.models.chat_format import get_format

    rendered = render_with_images(
        request.chat(), get_format(fmt), image_placeholder(processor), add_generation_prompt=True
    )
    from trainkit_core.datasets.images import load_image

    inputs = dict(
        processor(text=[rendered.text], images=[[load_image(r) for r in rendered.images]], return_tensors="pt")
    )
    torch.save(inputs, tmp_path / "inputs.pt")
    site = bare_env.build(tmp_path / "site")
    done = bare_env.run(site, BARE_IMAGE_GENERATE, str(out), str(tmp_path / "inputs.pt"), "8")
    assert done.returncode == 0, done.stderr[-3000:]
    bare = json.loads(done.stdout.strip().splitlines()[-1])
    assert bare["class"] == ("Gemma3ForConditionalGeneration" if fmt == "gemma3" else "Gemma4ForConditionalGeneration")
    if "served" not in trained:  # this test alone: ask the adapter as the infer test does
        args = ("infer", "--model-path", f"trained/{run.id}", "--prompt", "What is in the picture?")
        done = env.cli(*args, "--image", str(_image_file(env)), "--max-new-tokens", "8", "--json")
        trained["served"] = json.loads(done.stdout)["text"]
    stops = set(json.loads((out / "generation_config.json").read_text())["eos_token_id"])
    new = bare["new"]
    answer = new[: next((i for i, t in enumerate(new) if t in stops), len(new))]
    assert processor.tokenizer.decode(answer, skip_special_tokens=True) == trained["served"]


def _data_url(path: Path) -> str:
    import base64

    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


@pytest.mark.parametrize("size", list(TWINS))
def test_a_twin_trains_on_pictures_with_tool_calls(env: Env, size: str) -> None:
    """Pictures, a declared tool, a call and its answer in one conversation (with thinking on Gemma 4):
    the run checks its mask on the processor's output and trains."""
    pictures = sorted((env.datasets / "shapes" / "images").glob("train-*.png"))[:6]
    tool = {
        "type": "function",
        "function": {
            "name": "shape_name",
            "description": "The shape's name in another language.",
            "parameters": {"type": "object", "properties": {"shape": {"type": "string"}}, "required": ["shape"]},
        },
    }
    lines = []
    for i, picture in enumerate(pictures):
        shape = picture.stem.split("-")[2]
        call = {"id": f"c{i}", "type": "function", "function": {"name": "shape_name", "arguments": {"shape": shape}}}
        first: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": [call]}
        if TWINS[size] == "gemma4":
            first["reasoning_content"] = f"It is a {shape}; look its name up."
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Name the shape in French."},
                    {"type": "image_url", "image_url": {"url": _data_url(picture)}},
                ],
            },
            first,
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"le {shape}"},
            {"role": "assistant", "content": f"Le {shape}."},
        ]
        lines.append(json.dumps({"tools": [tool], "messages": messages}))
    folder = env.datasets / f"shape-tools-{TWINS[size]}"
    folder.mkdir()
    (folder / "train.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "dataset.toml").write_text(f'name = "{folder.name}"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
    done = env.cli(
        "train",
        "--dataset",
        folder.name,
        "--model-size",
        size,
        "--steps",
        "8",
        "--save-every",
        "8",
        "--max-seq-length",
        "1024",
    )
    found = re.search(r"model: (trained/run-\S+)", done.stdout)
    assert found, done.stdout + done.stderr
    shown = env.cli("runs", "logs", found.group(1).split("/", 1)[1])
    assert "loss mask checked on the processor's output" in shown.stdout, shown.stdout[-3000:]
