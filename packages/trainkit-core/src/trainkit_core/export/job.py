"""The ``export`` job: merge a trained adapter into its base and save full weights.

Runs where the models volume is mounted (a local process, a cloud container), so a
cloud export never passes the weights through the user's machine. Steps:

1. check the model path again (a job never trusts its caller) and read its card;
2. load the base *unquantised*: a run trained on a 4-bit base (``load_in_4bit``) is
   merged into the 16-bit weights of that base; a base checkpoint that is itself
   stored in 4-bit is dequantised first. Either way `trainkit_export.json` says so,
   because the merged weights then differ slightly from the 4-bit base + adapter
   that `trainkit infer` serves;
3. load the adapter with peft and `merge_and_unload`: LoRA deltas are added to the
   projections, and `modules_to_save` (the tiny recipe trains its embeddings and its
   untied head in full) replace the base's modules;
4. save safetensors, the tokenizer with its chat template, a generation config whose
   end-of-sequence ids include the chat format's end of turn (so a plain
   ``generate`` stops where trainkit's does), the base's processor files for the
   multimodal twins, and last the info file, in a temporary folder on the volume that
   is renamed into place: a reader sees the old export or the new one, never a part.

The merged model keeps the class the base loads as: `Gemma3ForCausalLM` for tiny,
and for the multimodal checkpoints (Gemma 3 4b/12b, Gemma 4 31b and their twins) their
``…ForConditionalGeneration`` class, which ``AutoModelForCausalLM`` maps to in
transformers 5 (checked for both twins). Heavy imports inside the function only.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from trainkit_core.plugins.job_context import JobContext

#: Files of a base checkpoint folder that describe its processor (multimodal bases).
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")


def _stored_dtype(config: dict[str, Any]) -> str:
    value = config.get("dtype") or config.get("torch_dtype") or (config.get("text_config") or {}).get("dtype")
    return str(value) if value in ("float32", "bfloat16", "float16") else "bfloat16"


def _base_config(source: str) -> dict[str, Any]:
    """The base's config.json (a local folder, or the hub cache's copy), {} when not found."""
    folder = Path(source)
    if (folder / "config.json").is_file():
        return json.loads((folder / "config.json").read_text())  # type: ignore[no-any-return]
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(source).to_dict()  # type: ignore[no-any-return]
    except Exception:  # only for choosing the dtype; loading the model reports properly
        return {}


def _check_prompts(ctx: JobContext, dataset: str, limit: int) -> list[list[dict[str, str]]]:
    """The conversations (reference answer dropped) a GGUF is checked on: the dataset's eval split."""
    from trainkit_core.datasets.reader import read_synced
    from trainkit_core.errors import UsageError
    from trainkit_core.evals import sets

    synced = read_synced(ctx.path("data"), dataset)
    if not synced.eval:
        raise UsageError(f"dataset {dataset!r} has no eval split to check the GGUF export on")
    examples = [sets.normalize_example(e, where=f"{dataset} eval example {i + 1}") for i, e in enumerate(synced.eval)]
    return [e["messages"][:-1] for e in examples[:limit]]


def _gguf(ctx: JobContext, folder: Path, ref: Any, fmt: Any, quant: str, dataset: str, limit: int) -> dict[str, Any]:
    """Write and verify the GGUF and the Modelfile in the staging `folder`; `JobError` when it fails."""
    from trainkit_core.errors import JobError
    from trainkit_core.export.gguf.check import check_with_llama_cpp, compare
    from trainkit_core.export.gguf.writer import MODELFILE, gguf_file_name, modelfile_text, write_gguf
    from trainkit_core.inference.generation import generate
    from trainkit_core.inference.loading import ModelCache
    from trainkit_core.inference.request import GenerateRequest
    from trainkit_core.models.chat_format import render_prompt

    conversations = _check_prompts(ctx, dataset, limit)
    name = gguf_file_name(quant)
    written = write_gguf(folder, folder / name, quant=quant, fmt=fmt, name=ref.path)
    (folder / MODELFILE).write_text(modelfile_text(name, fmt))
    loaded = ModelCache(ctx.path("models"), ctx.path("hf-cache")).get(ref.path)
    max_new = 64
    reference, prompts = [], []
    for messages in conversations:
        req = GenerateRequest.parse({"model_path": ref.path, "messages": messages, "max_new_tokens": max_new})
        reference.append(generate(loaded, req))
        text = render_prompt(messages, loaded.fmt)
        prompts.append((messages, text, loaded.tokenizer(text, add_special_tokens=False)["input_ids"]))
    answers, tools = check_with_llama_cpp(folder / name, prompts, max_new_tokens=max_new, fmt=loaded.fmt)
    check = {
        **compare(reference, answers, quant, tools),
        "llama_cpp": f"xllamacpp {importlib.metadata.version('xllamacpp')}",
        "dataset": dataset,
        "max_new_tokens": max_new,
    }
    if not check["passed"]:
        raise JobError(f"the GGUF export of {ref.path} failed its check in llama.cpp: {'; '.join(check['problems'])}")
    return {**written, "modelfile": MODELFILE, "check": check}


def export(
    ctx: JobContext,
    model_path: str,
    dtype: str = "auto",
    gguf: str | None = None,
    dataset: str | None = None,
    check_prompts: int = 8,
) -> dict[str, Any]:
    """Merge `model_path`'s adapter into its base; returns the export's description.

    With `gguf` (a type of `trainkit_core.export.gguf.writer.GGUF_TYPES`) the export also holds a
    GGUF file and an Ollama Modelfile, checked in llama.cpp on the first `check_prompts`
    eval prompts of `dataset` (default: the run's) before the export is renamed into place."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainkit_core.errors import JobError
    from trainkit_core.export.merged import (
        EXPORT_INFO,
        EXPORT_PARTIAL_PREFIX,
        EXPORT_REPLACED_PREFIX,
        check_export_request,
        export_path,
    )
    from trainkit_core.inference.loading import check_base, check_card, resolve_base
    from trainkit_core.models.trained import check_model_path, local_model_dir, read_card
    from trainkit_core.models.trained.layout import library_versions
    from trainkit_core.toolkit.folder_volume import FolderVolume

    started = time.time()
    os.environ["HF_HOME"] = str(ctx.path("hf-cache"))  # base models live on the hf-cache volume
    ref, dtype = check_export_request(model_path, dtype)
    if gguf is not None:
        from trainkit_core.export.gguf.writer import check_gguf_type

        gguf = check_gguf_type(gguf)
        missing = [name for name in ("gguf", "xllamacpp") if importlib.util.find_spec(name) is None]
        if missing:  # before minutes of merging, not after
            from trainkit_core.errors import JobError

            raise JobError(
                f"GGUF export needs {' and '.join(missing)} in the export job's environment",
                hint="pip install 'trainkit-core[gguf]' (xllamacpp is a prebuilt wheel of llama.cpp)",
            )
    root = ctx.path("models")
    ctx.reload("models")
    volume = FolderVolume(root)
    ref = check_model_path(ref.path, volume)
    folder = local_model_dir(ref, root)
    card = read_card(volume, ref)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    fmt = check_card(card, folder, tokenizer)
    source = resolve_base(card, ctx.path("hf-cache"))
    base_config = _base_config(source)
    if gguf is not None and base_config.get("architectures"):  # refused before minutes of merging
        from trainkit_core.export.gguf.writer import check_gguf_architecture

        check_gguf_architecture(base_config, gguf)
    quantized_base = bool(base_config.get("quantization_config"))
    # The card records the recipe, not the machine: load_in_4bit quantises on a GPU only, so a
    # run whose torch was a CPU build (the twins in tests, `tiny` never sets it) trained unquantised.
    trained_4bit = bool(card.config.get("load_in_4bit")) and not str(card.versions.get("torch", "")).endswith("+cpu")
    chosen = _stored_dtype(base_config) if dtype == "auto" else dtype
    torch_dtype = getattr(torch, chosen)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    notes: list[str] = []
    if quantized_base:
        from trainkit_core.models.quantization import bnb_4bit_config

        base = AutoModelForCausalLM.from_pretrained(
            source, quantization_config=bnb_4bit_config(), device_map={"": 0} if device == "cuda" else None
        )
        base = base.dequantize()
        base = base.to(torch_dtype)
        notes.append(f"the base checkpoint {source} is stored in 4-bit: it was dequantised to {chosen} and merged")
    else:
        base = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
        base.to(device)  # type: ignore[arg-type]
    if trained_4bit:
        notes.append(
            f"the run's recipe trains on a 4-bit quantised base (load_in_4bit, on a GPU); the adapter is merged into "
            f"the {chosen} weights of {card.base_model}, so answers may differ slightly from trainkit infer, which "
            "serves the 4-bit base + adapter on a GPU"
        )
    check_base(card, folder, tokenizer, base)
    model = PeftModel.from_pretrained(base, str(folder), is_trainable=False)
    merged = model.merge_and_unload()
    merged.eval()

    eot = tokenizer.convert_tokens_to_ids(fmt.end_of_turn)
    stops = [eot] + ([tokenizer.eos_token_id] if tokenizer.eos_token_id not in (None, eot) else [])
    merged.generation_config.eos_token_id = stops
    if tokenizer.pad_token_id is not None:
        merged.generation_config.pad_token_id = tokenizer.pad_token_id

    target = export_path(ref)
    final = root / target
    tmp = root / "exports" / f"{EXPORT_PARTIAL_PREFIX}{uuid.uuid4().hex[:12]}"
    tmp.mkdir(parents=True)
    try:
        merged.save_pretrained(str(tmp), safe_serialization=True, max_shard_size="5GB")
        tokenizer.save_pretrained(str(tmp))
        for name in PROCESSOR_FILES:
            if (Path(source) / name).is_file():
                shutil.copy2(Path(source) / name, tmp / name)
        architectures = json.loads((tmp / "config.json").read_text()).get("architectures") or []
        gguf_info = None
        if gguf is not None:
            from trainkit_core.export.gguf.writer import check_gguf_architecture

            check_gguf_architecture(json.loads((tmp / "config.json").read_text()))
            del merged, model, base  # the check loads infer's model; free the merge's memory first
            gguf_info = _gguf(ctx, tmp, ref, fmt, gguf, dataset or card.dataset_id, check_prompts)
        info = {
            "format": "merged",
            "model_path": ref.path,
            "run_id": ref.run_id,
            "step": ref.step,
            "base_model": card.base_model,
            "preset": card.preset,
            "chat_format": fmt.name,
            "end_of_turn": fmt.end_of_turn,
            "dtype": chosen,
            "architectures": architectures,
            "quantized_base": quantized_base,
            "trained_in_4bit": trained_4bit,
            "notes": notes,
            "gguf": gguf_info,
            "load_with": "transformers.AutoModelForCausalLM.from_pretrained(path)",
            "versions": library_versions(),
            "created_at": time.time(),
            "export_s": round(time.time() - started, 3),
        }
        (tmp / EXPORT_INFO).write_text(json.dumps(info, indent=2) + "\n")
        # `runs delete` removes the model with its exports: if it ran while this job merged,
        # renaming into place would bring back the deleted run's weights under exports/.
        ctx.reload("models")
        if not folder.exists():
            raise JobError(f"{ref.path} was deleted while it was being exported; nothing was written")
        if final.exists():  # a second export of the same model replaces the first, never mixed with it
            old = root / "exports" / f"{EXPORT_REPLACED_PREFIX}{uuid.uuid4().hex[:12]}"
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    ctx.commit("models")
    size = sum(f.stat().st_size for f in final.rglob("*") if f.is_file())
    return {**info, "export_path": target, "size_bytes": size}
