"""Loading trained models for inference, without Unsloth.

The base model comes from the description saved with the adapter
(`trained_model.json`): 4-bit with bitsandbytes on CUDA, full precision (fp32) on
CPU; then the peft adapter. The tokenizer is the one saved with the adapter and the
chat format the recorded one, never guessed; a model whose recorded format or base
does not fit what is on disk is refused with a message saying what differs.

`ModelCache` keeps loaded models between requests: one entry per base model, with
every adapter loaded on it as a named peft adapter, so several adapters on one base
share its weights. Imports torch, transformers and peft inside functions only.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.models.chat_format import ChatFormat, get_format
from trainkit_core.models.trained import ModelPath, TrainedModelCard, check_model_path, local_model_dir, read_card
from trainkit_core.toolkit.folder_volume import FolderVolume

log = logging.getLogger(__name__)

#: How many base models the cache keeps loaded at once (the oldest is dropped).
MAX_BASES = 2


def resolve_base(card: TrainedModelCard, hf_cache: Path | None) -> str:
    """Where to load the base model from: a local folder for `tiny`, else the hub id.

    The tiny base is built on the hf-cache volume (never downloaded); it is built again,
    identically, when the cache was emptied (`trainkit_core.models.trained.layout`).
    """
    from trainkit_core.models.trained.layout import resolve_base_model

    return resolve_base_model(card.model_dump(), hf_cache)


def _device(prefer: str | None = None) -> str:
    import torch

    if prefer:
        return prefer
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_base(source: str, *, device: str, quantize: bool, dtype: Any = None) -> Any:
    """The base causal LM: 4-bit (bitsandbytes) when `quantize` on CUDA, else fp32 on CPU
    (bf16 on CUDA); `dtype` overrides the unquantized dtype (the gate matches the trainer's)."""
    import torch
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {}
    if quantize and device == "cuda":
        from trainkit_core.models.quantization import bnb_4bit_config

        kwargs["quantization_config"] = bnb_4bit_config()
        kwargs["device_map"] = {"": 0}
    else:
        kwargs["dtype"] = dtype or (torch.float32 if device == "cpu" else torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if "device_map" not in kwargs:
        model.to(device)  # type: ignore[arg-type]
    model.eval()
    if device == "cpu":
        small_model_threads(model)
    return model


#: Below this many parameters a CPU model runs on one thread (see `small_model_threads`).
SMALL_MODEL_PARAMS = 10_000_000


def small_model_threads(model: Any) -> None:
    """Run a small model on one CPU thread, unless OMP_NUM_THREADS says otherwise.

    Measured here (tiny model, 2 cores shared with other jobs): 16 tokens took 1.2 s
    with torch's default 2 threads and 0.05 s with one; the matrices are too small for
    threads to pay for their synchronisation. Process-wide, so only for the processes
    that serve or score models (the warm worker, the infer and eval jobs).
    """
    import torch

    if os.environ.get("OMP_NUM_THREADS"):
        return
    if sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMS and torch.get_num_threads() != 1:
        log.info("small model on CPU: using one torch thread")
        torch.set_num_threads(1)


def check_card(card: TrainedModelCard, model_dir: Path, tokenizer: Any) -> ChatFormat:
    """Before the base is loaded: the recorded format fits the tokenizer, and the adapter's base the card's.

    Refuses with a message saying what differs; the recorded format is never replaced by a guess.
    """
    fmt = get_format(card.chat_format)
    where = f"{model_dir.name} (trained_model.json)"
    for marker in fmt.special_tokens:
        token_id = tokenizer.convert_tokens_to_ids(marker)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise UsageError(
                f"{where} records chat format {fmt.name!r}, but the tokenizer saved with it has no {marker!r} token"
            )
    adapter_cfg = json.loads((model_dir / "adapter_config.json").read_text())
    recorded = str(adapter_cfg.get("base_model_name_or_path") or "").rstrip("/")
    if recorded and not any(recorded == name or recorded.endswith("/" + name) for name in _base_names(card)):
        raise UsageError(f"{where} records base model {card.base_model!r}, but its adapter was made on {recorded!r}")
    return fmt


def check_base(card: TrainedModelCard, model_dir: Path, tokenizer: Any, base: Any) -> None:
    """After the base is loaded: its vocabulary and type fit the tokenizer and the card."""
    where = f"{model_dir.name} (trained_model.json)"
    rows = base.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        raise UsageError(
            f"{where}: the tokenizer has {len(tokenizer)} tokens but base model {card.base_model!r} "
            f"has {rows} embeddings; the base is not the one the adapter was trained on"
        )
    model_type = getattr(base.config, "model_type", "")
    recorded_type = card.extras.get("model_type")
    if recorded_type and model_type and recorded_type != model_type:
        raise UsageError(f"{where} records model type {recorded_type!r}, the base loaded is {model_type!r}")


def check_fit(card: TrainedModelCard, model_dir: Path, tokenizer: Any, base: Any | None = None) -> ChatFormat:
    """`check_card`, then `check_base` when a base is given."""
    fmt = check_card(card, model_dir, tokenizer)
    if base is not None:
        check_base(card, model_dir, tokenizer, base)
    return fmt


def _base_names(card: TrainedModelCard) -> set[str]:
    """The names an adapter's recorded base may carry for this card's base model."""
    from trainkit_core.models.presets import PRESETS
    from trainkit_core.models.trained.layout import base_model_path

    names = {card.base_model}
    extras = card.extras
    if extras.get("base_model_path") and extras["base_model_path"] == base_model_path(card.base_model):
        names.add(str(extras["base_model_path"]).rstrip("/"))
    if extras.get("unsloth_model"):
        names.add(str(extras["unsloth_model"]))
    if card.config.get("unsloth_model"):
        names.add(str(card.config["unsloth_model"]))
    preset = PRESETS.get(card.preset)
    if preset is not None and preset.unsloth_model:
        names.add(preset.unsloth_model)
    return {n for n in names if n}


def load_adapter_model(
    folder: Path, card: TrainedModelCard, hf_cache: Path | None, *, device: str, quantize: bool, dtype: Any = None
) -> tuple[Any, Any, ChatFormat]:
    """(peft model, tokenizer, chat format) of one saved adapter on a freshly loaded base.

    Exactly what the cache does for a first request; the post-training gate uses it to
    check that what is served is what was trained.
    """
    from peft import PeftModel
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    fmt = check_card(card, folder, tokenizer)
    base = load_base(resolve_base(card, hf_cache), device=device, quantize=quantize, dtype=dtype)
    check_base(card, folder, tokenizer, base)
    model = PeftModel.from_pretrained(base, str(folder), adapter_name="default", is_trainable=False)
    model.eval()
    return model, tokenizer, fmt


def adapter_name(ref: ModelPath) -> str:
    """A peft adapter name for a model path (peft names cannot hold '.' or '/')."""
    return ref.run_id.replace("-", "_") + (f"_s{ref.step}" if ref.step is not None else "")


@dataclass
class LoadedModel:
    """A model ready to generate: the shared peft model with this adapter's name."""

    ref: ModelPath
    card: TrainedModelCard
    fmt: ChatFormat
    tokenizer: Any
    model: Any  # a peft PeftModel holding this adapter (and maybe others)
    adapter: str
    device: str
    lock: threading.Lock
    load_s: float = 0.0
    cached: bool = False
    processor: Any = None  # a multimodal model's processor (saved with its adapter), else None


@dataclass
class _Adapter:
    name: str
    stamp: tuple[tuple[str, int, int], ...]
    tokenizer: Any
    fmt: ChatFormat
    processor: Any = None


def _stamp(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when a model folder is written again (a resumed run saves anew)."""
    found = []
    for item in sorted(folder.iterdir()):
        if item.is_file():
            st = item.stat()
            found.append((item.name, st.st_mtime_ns, st.st_size))
    return tuple(found)


@dataclass
class _BaseEntry:
    model: Any  # PeftModel once an adapter is loaded
    device: str
    adapters: dict[str, _Adapter] = field(default_factory=dict)  # model path -> its loaded adapter
    lock: threading.Lock = field(default_factory=threading.Lock)


class ModelCache:
    """Loaded models, kept between requests; adapters on one base share it.

    `models_root` is where the models volume is mounted (a folder). `loads` counts
    base-model loads and `adapter_loads` adapter loads, so callers can tell a warm
    answer from a cold one.
    """

    def __init__(self, models_root: Path, hf_cache: Path | None = None, *, device: str | None = None) -> None:
        self.models_root = Path(models_root)
        self.volume = FolderVolume(self.models_root)
        self.hf_cache = hf_cache
        self.device = device
        self._bases: OrderedDict[tuple[str, str, bool], _BaseEntry] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0
        self.adapter_loads = 0

    def loaded(self) -> list[dict[str, Any]]:
        return [
            {"base": key[0], "device": key[1], "quantized": key[2], "adapters": sorted(entry.adapters)}
            for key, entry in self._bases.items()
        ]

    def get(self, model_path: str, *, quantize: bool | None = None) -> LoadedModel:
        """The model at `model_path`, validated first; loaded on first use, cached after."""
        ref = check_model_path(model_path, self.volume)
        folder = local_model_dir(ref, self.models_root)
        card = read_card(self.volume, ref)
        with self._lock:
            started = time.perf_counter()
            device = _device(self.device)
            quant = (device == "cuda") if quantize is None else quantize
            source = resolve_base(card, self.hf_cache)
            key = (source, device, quant)
            entry = self._bases.get(key)
            stamp = _stamp(folder)
            known = entry.adapters.get(ref.path) if entry is not None else None
            cached = known is not None and known.stamp == stamp
            if cached and entry is not None and known is not None:
                self._bases.move_to_end(key)
                tokenizer, fmt, name, processor = known.tokenizer, known.fmt, known.name, known.processor
            else:
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(str(folder))
                fmt = check_card(card, folder, tokenizer)
                if entry is None:
                    base = load_base(source, device=device, quantize=quant)
                    check_base(card, folder, tokenizer, base)
                    self.loads += 1
                    entry = self._add_base(key, base, device)
                else:
                    self._bases.move_to_end(key)
                    check_base(card, folder, tokenizer, entry.model)
                name = self._load_adapter(entry, ref, folder)
                from trainkit_core.models.processors import load_processor

                model_type = getattr(getattr(entry.model, "config", None), "model_type", None)
                processor = load_processor(folder, model_type=model_type)
                entry.adapters[ref.path] = _Adapter(name, stamp, tokenizer, fmt, processor)
                if known is not None:  # the folder was written again (e.g. a resumed run): drop the old weights
                    log.info("%s changed on the volume; its adapter was loaded again", ref.path)
                    with entry.lock:
                        entry.model.delete_adapter(known.name)
            return LoadedModel(
                ref=ref,
                card=card,
                fmt=fmt,
                tokenizer=tokenizer,
                model=entry.model,
                adapter=name,
                device=device,
                lock=entry.lock,
                load_s=time.perf_counter() - started,
                cached=cached,
                processor=processor,
            )

    def clear(self) -> int:
        """Drop every loaded model (the next request loads again); the number dropped.

        Frees what they hold: memory, and the files their weights map (a Modal volume
        cannot be reloaded while files of it are open).
        """
        import gc
        import sys

        with self._lock:
            dropped = len(self._bases)
            self._bases.clear()
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
        if dropped:
            log.info("dropped %d base model(s) from the cache", dropped)
        return dropped

    def _add_base(self, key: tuple[str, str, bool], base: Any, device: str) -> _BaseEntry:
        while len(self._bases) >= MAX_BASES:
            old_key, _ = self._bases.popitem(last=False)
            log.info("dropping base model %s from the cache", old_key[0])
        entry = _BaseEntry(model=base, device=device)
        self._bases[key] = entry
        return entry

    def _load_adapter(self, entry: _BaseEntry, ref: ModelPath, folder: Path) -> str:
        from peft import PeftModel

        name = f"{adapter_name(ref)}_{self.adapter_loads}"  # unique, so a reload never clashes
        with entry.lock:
            if isinstance(entry.model, PeftModel):
                entry.model.load_adapter(str(folder), adapter_name=name, is_trainable=False)
            else:
                entry.model = PeftModel.from_pretrained(entry.model, str(folder), adapter_name=name, is_trainable=False)
            entry.model.eval()
        self.adapter_loads += 1
        return name
