"""The unsloth backend trains the tiny model and the twins on CPU (the `unsloth` nox session only).

Unsloth 2026.10 falls back to CPU when there is no GPU ("no GPU found, training on
CPU"); this proves the backend's code paths end to end through `trainkit train
--backend unsloth`: FastLanguageModel on the tiny model, FastModel (the real presets'
branch) on the twins of Gemma 3 multimodal and Gemma 4. Unsloth's CPU fallback ignores
`finetune_vision_layers`; without the LoRA pattern Unsloth's GPU path builds from it
(which trainkit passes on a CPU) the Gemma 4 twin fails ("Target module
Gemma4ClippableLinear ... is not supported") and the Gemma 3 twin's adapter gets SigLIP
weights (docs/concepts/model-sizes.md). A text run trains no vision layer, whatever the
twin's preset says. The Gemma 4 twin is built with its processor, which the transformers
Unsloth allows imports with torchvision: where that cannot load, the run must fail
saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ml, pytest.mark.unsloth, pytest.mark.e2e, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]


def _offline_env(home: Path) -> dict[str, str]:
    """The CLI's environment: its own home, the repository's datasets, no hub."""
    return {
        **os.environ,
        "TRAINKIT_HOME": str(home),
        "TRAINKIT_DATASETS_DIR": str(REPO / "datasets"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def test_unsloth_backend_trains_the_tiny_model(tmp_path: Path) -> None:
    pytest.importorskip("unsloth")
    home = tmp_path / "home"
    env = _offline_env(home)
    args = ["train", "--dataset", "demo", "--steps", "60", "--backend", "unsloth", "--save-every", "30", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=900
    )
    logs = "\n".join(p.read_text(errors="replace") for p in (home / "logs").glob("*.log"))
    print(logs[-6000:])  # what unsloth printed, for the session's output
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout)
    assert record["status"] == "succeeded", record["error_message"]
    assert record["framework"] == "unsloth"
    assert record["metrics"]["final_loss"] < record["metrics"]["first_loss"]
    print(
        "unsloth run metrics:",
        json.dumps({k: record["metrics"].get(k) for k in ("first_loss", "final_loss", "train_runtime_s", "steps")}),
    )
    out = home / "volumes" / "trainkit-models" / "trained" / record["id"]
    assert (out / "adapter_model.safetensors").is_file()
    card = json.loads((out / "trained_model.json").read_text())
    assert card["backend"] == "unsloth" and "unsloth" in card["versions"]


@pytest.mark.parametrize("size", ["tiny-gemma3mm", "tiny-gemma4", "tiny-gemma4-e", "tiny-gemma4-moe"])
def test_unsloth_fastmodel_trains_the_twins(tmp_path: Path, size: str) -> None:
    """The branch every real preset takes: `FastModel` on a multimodal Gemma, LoRA off the towers."""
    pytest.importorskip("unsloth")
    home = tmp_path / "home"
    env = _offline_env(home)
    args = ["train", "--dataset", "demo", "--model-size", size, "--steps", "6", "--backend", "unsloth", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "trainkit_cli", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=900
    )
    logs = "\n".join(p.read_text(errors="replace") for p in (home / "logs").glob("*.log"))
    print(logs[-6000:])
    if size.startswith("tiny-gemma4") and not gemma4_processor_loads():
        # The twin is built with its processor, which transformers <= 5.17 (Unsloth's cap)
        # imports with torchvision; there is no CPU torchvision here.
        record = json.loads(done.stdout)
        assert done.returncode != 0 and record["status"] == "failed"
        assert "Gemma 4's processor cannot be loaded" in record["error_message"], record["error_message"]
        return
    assert done.returncode == 0, done.stderr[-3000:] + logs[-3000:]
    record = json.loads(done.stdout)
    assert record["status"] == "succeeded", record["error_message"]
    assert record["framework"] == "unsloth"
    out = home / "volumes" / "trainkit-models" / "trained" / record["id"]
    from safetensors import safe_open

    with safe_open(str(out / "adapter_model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    assert keys and not [k for k in keys if "vision" in k or "audio" in k or "multi_modal" in k]


def gemma4_processor_loads() -> bool:
    """Whether this transformers can import Gemma 4's processor (up to 5.17 it needs torchvision)."""
    try:
        from transformers import Gemma4Processor  # noqa: F401
    except ImportError:
        return False
    return True


def test_unsloth_on_two_processes_trains_the_adapter_one_process_does(tmp_path: Path) -> None:
    """Unsloth's model under torchrun (ddp over gloo, as Unsloth's multi-GPU guide runs it through accelerate).

    2 processes of global batch 2 against 1 process of batch 2: the same data order, so the
    same losses and adapter within float rounding (the tolerance of tests/core/test_distributed_ml.py).
    """
    pytest.importorskip("unsloth")
    import torch
    from safetensors.torch import load_file

    home = tmp_path / "home"
    env = _offline_env(home)
    recipe = ["--dataset", "demo", "--steps", "4", "--batch-size", "2", "--lr", "1e-3", "--save-every", "1000"]
    records = []
    for processes in ("1", "2"):
        args = ["train", *recipe, "--backend", "unsloth", "--processes", processes, "--json"]
        done = subprocess.run(
            [sys.executable, "-m", "trainkit_cli", *args],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
        )
        logs = "\n".join(p.read_text(errors="replace") for p in (home / "logs").glob("*.log"))
        assert done.returncode == 0, f"{done.stderr[-3000:]}\n{logs[-6000:]}"
        records.append(json.loads(done.stdout))
    one, two = records
    assert one["status"] == two["status"] == "succeeded", (one["error_message"], two["error_message"])
    assert one["framework"] == two["framework"] == "unsloth" and two["config"]["processes"] == 2
    for key in ("first_loss", "final_loss"):
        assert two["metrics"][key] == pytest.approx(one["metrics"][key], rel=1e-3), key
    models = home / "volumes" / "trainkit-models" / "trained"
    a = load_file(str(models / one["id"] / "adapter_model.safetensors"))
    b = load_file(str(models / two["id"] / "adapter_model.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=1e-3, atol=1e-6), name
