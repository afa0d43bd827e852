"""The tiny twins of the real presets run the whole pipeline on a CPU (the `ml` session).

`tiny-gemma3mm` is a `Gemma3ForConditionalGeneration` with a SigLIP tower (the class of
`4b`/`12b`), `tiny-gemma4` a `Gemma4ForConditionalGeneration` with per-layer attention
and a vision tower (the class of `31b`). For each, one run per module (shared by the
assertions): it trains through the local provider, checkpoints, is stopped, resumed to
a few more steps, passes the loss-mask check on its own chat format and the adapter
gate, is scored on the eval split; then it answers through the warm worker and the
infer job, and the eval job scores it. A third run trains from a model folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.ml, pytest.mark.timeout(1800)]

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

REPO = Path(__file__).resolve().parents[2]
TWIN_SIZES = ("tiny-gemma3mm", "tiny-gemma4", "tiny-gemma4-e", "tiny-gemma4-moe")
EXPECTED = {
    "tiny-gemma3mm": {"class": "Gemma3ForConditionalGeneration", "format": "gemma3", "towers": ("vision",)},
    "tiny-gemma4": {"class": "Gemma4ForConditionalGeneration", "format": "gemma4", "towers": ("vision",)},
    "tiny-gemma4-e": {"class": "Gemma4ForConditionalGeneration", "format": "gemma4", "towers": ("vision", "audio")},
    "tiny-gemma4-moe": {"class": "Gemma4ForConditionalGeneration", "format": "gemma4", "towers": ("vision",)},
}


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _dataset(root: Path) -> Path:
    """16 demo conversations to train on and 3 held out (so the run is scored after training)."""
    lines = (REPO / "datasets" / "demo" / "train.jsonl").read_text().splitlines()
    folder = root / "twinmini"
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text("\n".join(lines[:16]) + "\n")
    (folder / "eval.jsonl").write_text("\n".join(lines[16:19]) + "\n")
    (folder / "dataset.toml").write_text(
        'name = "twinmini"\nformat = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )
    return root


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from trainkit_core import get_provider
    from trainkit_core.settings import ComputeSettings, DatasetSettings, ProviderSettings, Settings

    home = tmp_path_factory.mktemp("twins-home")
    settings = Settings(
        provider=ProviderSettings(home=home),
        datasets=DatasetSettings(datasets_dir=_dataset(tmp_path_factory.mktemp("twins-datasets"))),
        compute=ComputeSettings(infer_idle_timeout_s=600),  # one warm worker for the module; ended below
    )
    yield get_provider("local", settings)
    from trainkit_core.local.inference_server import read_record

    worker = read_record(home)
    if worker:
        try:
            os.kill(worker["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------- structure (no training)


@pytest.mark.parametrize("size", TWIN_SIZES)
def test_the_twin_has_its_real_models_structure(size: str, tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from trainkit_core.models.twins import TWINS, ensure_twin_base
    from trainkit_core.training.backends import model_kind

    twin = TWINS[f"trainkit/{size}"]
    folder = ensure_twin_base(twin.base_model, tmp_path / "a")
    config = AutoConfig.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert type(config).__name__ == twin.config_class and config.architectures == [twin.model_class]
    assert model_kind(str(folder)).towers == EXPECTED[size]["towers"]  # what the Unsloth backend reads
    text = config.text_config
    assert config.tie_word_embeddings and text.tie_word_embeddings
    assert [tokenizer.convert_tokens_to_ids(t) for t in ("<pad>", "<eos>", "<bos>", "<unk>")] == [0, 1, 2, 3]
    assert tokenizer.convert_tokens_to_ids(tokenizer.image_token) == config.image_token_id
    sliding, full = "sliding_attention", "full_attention"
    if size == "tiny-gemma3mm":
        assert text.layer_types == [sliding] * 5 + [full] + [sliding] * 2
        assert text.final_logit_softcapping is None and text.attn_logit_softcapping is None
        assert text.rope_parameters["full_attention"]["rope_type"] == "linear"
        assert config.vision_config.model_type == "siglip_vision_model" and config.mm_tokens_per_image == 16
        assert (folder / "processor_config.json").is_file()
    else:
        from transformers.integrations.heterogeneity.configuration_utils import AmbiguousGlobalPerLayerAttributeError

        assert text.layer_types == ([sliding] * 5 + [full]) * 2
        with pytest.raises(AmbiguousGlobalPerLayerAttributeError):
            _ = text.head_dim  # as on google/gemma-4-31B-it: per-layer heterogeneous
        assert text.per_layer_config[5].head_dim == 64 and text.per_layer_config[0].head_dim == 32
        assert text.final_logit_softcapping == 30.0 and config.vision_config.model_type == "gemma4_vision"
        if size == "tiny-gemma4-e":  # E2B/E4B: per-layer inputs, shared keys and values, audio
            assert text.hidden_size_per_layer_input > 0 and text.num_kv_shared_layers > 0
            assert not text.attention_k_eq_v and config.audio_config.model_type == "gemma4_audio"
        else:
            assert text.attention_k_eq_v and config.audio_config is None
            assert text.enable_moe_block == (size == "tiny-gemma4-moe")
        assert tokenizer.convert_tokens_to_ids(tokenizer.audio_token) == config.audio_token_id
    # Deterministic: built again elsewhere, the same weights byte for byte.
    again = ensure_twin_base(twin.base_model, tmp_path / "b")
    assert (again / "model.safetensors").read_bytes() == (folder / "model.safetensors").read_bytes()


def test_lora_targets_no_tower_not_even_gemma_4s_audio_tower(tmp_path: Path) -> None:
    """E2B/E4B (through --base-model) have an audio tower with q/k/v/o projections of its own."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, Gemma4AudioConfig, Gemma4ForConditionalGeneration

    from trainkit_core.models.twins import ensure_twin_base, gemma4_config
    from trainkit_core.training.backends import TARGET_MODULES

    folder = ensure_twin_base("trainkit/tiny-gemma4", tmp_path)
    config = gemma4_config(AutoTokenizer.from_pretrained(folder))
    config.audio_config = Gemma4AudioConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        subsampling_conv_channels=[8, 4],
        output_proj_dims=32,
    )
    torch.manual_seed(0)
    model = Gemma4ForConditionalGeneration(config)
    towers = [n for n, _ in model.named_modules() if n.endswith(".q_proj") and ("audio" in n or "vision" in n)]
    assert any("audio_tower" in n for n in towers) and any("vision_tower" in n for n in towers)
    peft_model = get_peft_model(model, LoraConfig(r=2, target_modules=TARGET_MODULES))
    adapted = [n for n, m in peft_model.named_modules() if hasattr(m, "lora_A")]
    assert adapted and all(".language_model.layers." in n for n in adapted)


# --------------------------------------------------------------------------- the pipeline


def _progress(run: Any) -> list[dict[str, Any]]:
    return [e for e in run.events.read() if e["type"] == "progress"]


@pytest.fixture(scope="module", params=TWIN_SIZES)
def pipeline(request: pytest.FixtureRequest, provider: Any) -> dict[str, Any]:
    """Train a twin until its first checkpoint, stop it, resume it four steps further."""
    from trainkit_core.training.submit import resume_run, start_run

    size = request.param
    run = start_run(provider, {"dataset": "twinmini", "model_size": size, "steps": 100_000, "save_every": 3})
    _wait_for(lambda: run.reload().latest_checkpoint() is not None or run.done(), 600, "the first checkpoint")
    assert not run.done(), run.error_message
    from trainkit_core.runs.training_run import RunStore

    RunStore.for_provider(provider).stop_flag(run.id).request("test")
    run.wait(timeout=600)
    stopped = {
        "status": run.status,
        "error": run.error_message,
        "step": run.step,
        "checkpoints": [c.step for c in run.checkpoints()],
    }
    events_before = run.events.read()
    resume_run(provider, run.id, steps=run.step + 4)
    run.wait(timeout=600)
    models = Path(provider.volume("models").root)
    return {
        "size": size,
        "stopped": stopped,
        "events_before": events_before,
        "run": run,
        "out": models / "trained" / run.id,
        "hf_cache": Path(provider.volume("hf-cache").root),
        "models": models,
    }


def test_the_twin_trains_checkpoints_stops_and_resumes(pipeline: dict[str, Any]) -> None:
    stopped, run = pipeline["stopped"], pipeline["run"]
    assert stopped["status"] == "stopped", stopped["error"]
    assert stopped["step"] >= 3 and stopped["checkpoints"][-1] == stopped["step"]  # saved at the stop
    assert run.status == "succeeded", run.error_message
    assert run.step == stopped["step"] + 4 and run.attempt == 2
    after = run.events.read(pipeline["events_before"][-1]["seq"])
    assert any(e.get("message", "").startswith(f"resuming from checkpoint at step {stopped['step']}") for e in after)
    steps = [e["step"] for e in _progress(run) if e["seq"] > pipeline["events_before"][-1]["seq"]]
    assert min(steps) == stopped["step"] + 1 and max(steps) == run.step
    assert [c.step for c in run.checkpoints()][-1] == run.step
    assert run.metrics["final_loss"] < run.metrics["first_loss"]  # lr 1e-2 on 16 examples: it learns


def test_the_loss_mask_is_checked_on_the_twins_chat_format(pipeline: dict[str, Any]) -> None:
    from transformers import AutoTokenizer

    from trainkit_core.models.chat_format import check_loss_mask, get_format

    expected = EXPECTED[pipeline["size"]]["format"]
    checks = [e for e in pipeline["run"].events.read() if e.get("message") == "loss mask checked on the tokenizer"]
    assert checks and {e["chat_format"] for e in checks} == {expected}
    # The tokenizer saved with the adapter is the twin's own (its image tokens included).
    tokenizer = AutoTokenizer.from_pretrained(pipeline["out"])
    assert tokenizer.image_token in tokenizer.get_vocab()
    assert check_loss_mask(tokenizer, get_format(expected))["chat_format"] == expected


def test_the_adapter_gate_passed_and_the_eval_split_was_scored(pipeline: dict[str, Any]) -> None:
    metrics = pipeline["run"].metrics
    assert metrics["gate_round_trip_max_abs_diff"] <= metrics["gate_round_trip_tolerance"]
    assert metrics["gate_effect_max_abs_diff"] > metrics["gate_effect_minimum"]
    assert metrics["gate_reloaded"] == "fresh base"
    assert metrics["eval_examples"] == 3 and metrics["base_eval_examples"] == 3
    assert metrics["eval_mean_loss"] > 0 and metrics["base_eval_mean_loss"] > 0


def test_no_adapter_weight_lands_in_a_vision_or_audio_tower(pipeline: dict[str, Any]) -> None:
    from safetensors import safe_open
    from transformers import AutoConfig

    with safe_open(str(pipeline["out"] / "adapter_model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    # Beside LoRA, only what the twin's preset trains in full (tiny-gemma3mm: its random
    # embeddings and head, the shapes demo's recipe), never a tower.
    from trainkit_core.models.presets import get_preset

    in_full = get_preset(pipeline["size"]).modules_to_save
    full = [k for k in keys if any(k.endswith(f".{m}.weight") for m in in_full)]
    keys = [k for k in keys if k not in full]
    assert len(full) == len(in_full)
    assert keys and all(".language_model.layers." in k for k in keys), [k for k in keys if "language_model" not in k]
    assert not [k for k in keys if any(t in k for t in ("vision", "audio", "multi_modal", "embed_"))]
    # Every projection of every language layer has its pair of LoRA weights; Gemma 4's
    # full-attention layers reuse keys as values and have no v_proj.
    config = AutoConfig.from_pretrained(
        pipeline["hf_cache"] / json.loads((pipeline["out"] / "trained_model.json").read_text())["base_model_path"]
    )
    text = config.text_config
    missing_v = (
        sum(1 for t in text.layer_types if t == "full_attention") if getattr(text, "attention_k_eq_v", False) else 0
    )
    # E2B/E4B's last layers reuse earlier layers' keys and values: no k_proj or v_proj there.
    shared = 2 * (getattr(text, "num_kv_shared_layers", 0) or 0)
    assert len(keys) == 2 * (7 * text.num_hidden_layers - missing_v - shared)


@pytest.mark.parametrize("size", ["tiny-gemma4", "tiny-gemma4-e", "tiny-gemma4-moe"])
def test_the_loss_is_the_same_without_the_cache_and_with_gradient_checkpointing(size: str, tmp_path: Path) -> None:
    """Peers' E2B/E4B runs lost the shared keys and values once the cache was off or with
    gradient checkpointing on (a wrong loss, no error). Training runs that way, so the loss
    must equal a plain forward's, LoRA attached as training attaches it."""
    import torch
    from transformers import AutoModelForImageTextToText

    from trainkit_core.models.twins import ensure_twin_base
    from trainkit_core.training.backends import TARGET_MODULES

    folder = ensure_twin_base(f"trainkit/{size}", tmp_path)
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(folder)
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=TARGET_MODULES, init_lora_weights=False))
    ids = torch.randint(20, 500, (2, 40))
    model.eval()
    with torch.no_grad():
        plain = model(input_ids=ids, labels=ids).loss
        no_cache = model(input_ids=ids, labels=ids, use_cache=False).loss
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    checkpointed = model(input_ids=ids, labels=ids, use_cache=False).loss
    checkpointed.backward()
    assert torch.isfinite(plain) and abs(plain.item() - no_cache.item()) < 1e-5
    assert abs(plain.item() - checkpointed.item()) < 1e-5
    grads = [p.grad for n, p in model.named_parameters() if "lora_" in n]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)


def test_inference_loads_the_base_as_the_real_one_loads(pipeline: dict[str, Any]) -> None:
    from trainkit_core.inference.loading import ModelCache

    card = json.loads((pipeline["out"] / "trained_model.json").read_text())
    assert (
        card["base_model"] == f"trainkit/{pipeline['size']}"
        and card["chat_format"] == EXPECTED[pipeline["size"]]["format"]
    )
    cache = ModelCache(pipeline["models"], pipeline["hf_cache"], device="cpu")
    loaded = cache.get(f"trained/{pipeline['run'].id}")
    base = loaded.model.get_base_model()
    assert type(base).__name__ == EXPECTED[pipeline["size"]]["class"]
    assert base.model.vision_tower is not None  # the tower is loaded, as the real checkpoint's is
    assert loaded.fmt.name == EXPECTED[pipeline["size"]]["format"]


def test_the_warm_worker_and_the_infer_job_answer(pipeline: dict[str, Any], provider: Any) -> None:
    from trainkit_core.inference import client

    request = {"model_path": f"trained/{pipeline['run'].id}", "prompt": "Uppercase: snow blue", "max_new_tokens": 6}
    first = client.generate(provider, request)
    second = client.generate(provider, request)
    assert first["cached"] is False and second["cached"] is True and second["text"] == first["text"]
    job = client.generate(provider, request, use_server=False)
    assert job["text"] == first["text"]  # greedy: the job loads what the worker loaded
    assert 1 <= job["usage"]["completion_tokens"] <= 6


def test_the_eval_job_scores_the_twin(pipeline: dict[str, Any], provider: Any) -> None:
    from trainkit_core.evals.client import run_eval

    report = run_eval(provider, model_path=f"trained/{pipeline['run'].id}", max_new_tokens=8, timeout=600)
    assert report["example_count"] == 3
    assert report["tuned"]["examples"] == 3 and report["base"]["examples"] == 3
    assert report["base_model"] == f"trainkit/{pipeline['size']}"


def test_the_merged_export_keeps_the_twins_class_and_answers_as_infer(
    pipeline: dict[str, Any], provider: Any, tmp_path: Path
) -> None:
    """The export job on a multimodal base: its own ConditionalGeneration class, the
    towers kept, and the merged weights give the infer job's greedy answer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainkit_core.export.merged import download, start_export
    from trainkit_core.inference import client
    from trainkit_core.models.chat_format import get_format, render_prompt

    expected = EXPECTED[pipeline["size"]]
    model_path = f"trained/{pipeline['run'].id}"
    path, handle = start_export(provider, model_path)
    info = handle.wait(timeout=600)
    assert info["architectures"] == [expected["class"]] and info["notes"] == []
    out = tmp_path / "merged"
    download(provider.volume("models"), path, out)

    prompt = "Uppercase: snow blue"
    infer = client.generate(
        provider, {"model_path": model_path, "prompt": prompt, "max_new_tokens": 6}, use_server=False
    )
    tok = AutoTokenizer.from_pretrained(out)
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(merged).__name__ == expected["class"] and merged.model.vision_tower is not None
    text = render_prompt([{"role": "user", "content": prompt}], get_format(expected["format"]))
    ids = tok(text, add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        output = merged.generate(**ids, max_new_tokens=6, do_sample=False)
    new = output[0, ids["input_ids"].shape[1] :].tolist()
    stops = merged.generation_config.eos_token_id
    stops = stops if isinstance(stops, list) else [stops]
    new = new[:-1] if new and new[-1] in stops else new
    assert tok.decode(new, skip_special_tokens=True) == infer["text"]


# --------------------------------------------------------------------------- a model folder


def test_training_from_a_local_folder(provider: Any, tmp_path: Path) -> None:
    """A Gemma 4 model saved in a folder whose name says nothing: its config.json decides the format and class."""
    from trainkit_core.inference.loading import ModelCache
    from trainkit_core.models.twins import ensure_twin_base
    from trainkit_core.training.submit import start_run

    folder = tmp_path / "my-export"
    shutil.copytree(ensure_twin_base("trainkit/tiny-gemma4", Path(provider.volume("hf-cache").root)), folder)
    run = start_run(
        provider,
        # Hyper-parameters of the twins (a custom base takes 4b's: lr 2e-4 would barely move the adapter in 3 steps).
        {
            "dataset": "twinmini",
            "base_model": str(folder),
            "steps": 3,
            "batch_size": 4,
            "grad_accum": 1,
            "learning_rate": 1e-2,
            "warmup_steps": 0,
            "max_seq_length": 256,
        },
    )
    assert run.config["chat_format"] == "gemma4"
    run.wait(timeout=600)
    assert run.status == "succeeded", run.error_message
    models = Path(provider.volume("models").root)
    card = json.loads((models / "trained" / run.id / "trained_model.json").read_text())
    assert card["base_model"] == str(folder) and card["preset"] == ""
    loaded = ModelCache(models, Path(provider.volume("hf-cache").root), device="cpu").get(f"trained/{run.id}")
    assert type(loaded.model.get_base_model()).__name__ == "Gemma4ForConditionalGeneration"
