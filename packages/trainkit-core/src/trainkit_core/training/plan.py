"""A run's plan before launch: what it will train, for how long, at what cost.

`make_plan(provider, config)` answers with a `Plan`: the examples, epochs and steps,
the tokens of one epoch, the GPU, an estimated duration and an estimated cost.

- **Tokens** are counted exactly (``tokens_exact``) with the model's own tokenizer
  when it is on this machine: the tiny preset's is built from the dataset exactly as
  the job builds it, a real model's is read from the local Hugging Face cache (never
  downloaded). Otherwise (``exact=False``, no training stack, no cached tokenizer) they
  are estimated at `CHARS_PER_TOKEN` characters per token and labelled as an estimate.
- **Duration**: the tokens to train over a throughput (tokens/s) for the preset on
  that GPU: the median of earlier succeeded runs of the same preset and GPU (their
  ``tokens_per_s`` metric) when there are some, else ``data/throughput.toml`` (dated,
  with its sources), plus the table's start-up time.
- **Cost**: the duration at the price a run would record (`trainkit_core.pricing`).

The dataset is the local copy (``TRAINKIT_DATASETS_DIR``), else the synced one on a
local provider's data volume. No heavy imports unless an exact count needs them.
"""

from __future__ import annotations

import math
import statistics
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from trainkit_core.datasets.validate import CHARS_PER_TOKEN
from trainkit_core.errors import NotFoundError
from trainkit_core.pricing import price_for_run, split_gpu
from trainkit_core.training.config import TrainConfig

#: Earlier runs a measured throughput is taken from (the newest).
MEASURED_RUNS = 5


class Plan(BaseModel):
    """What a run will do, before it starts. Estimates say so."""

    dataset: str
    model: str
    preset: str
    provider: str
    gpu: str
    examples: int
    eval_examples: int
    batch_size: int
    grad_accum: int
    steps_per_epoch: int
    steps: int
    epochs: float
    tokens_per_epoch: int
    tokens_exact: bool
    tokens_method: str
    tokens_total: int
    tokens_per_s: float | None
    throughput_source: str
    estimated_seconds: float | None
    usd_per_hour: float | None
    gpus: int
    estimated_cost_usd: float | None
    price_source: str
    notes: list[str] = []

    def lines(self) -> list[str]:
        """The plan as a person reads it (the CLI prints these)."""
        from trainkit_core.pricing import format_cost

        tokens = f"{self.tokens_per_epoch:,} tokens per epoch"
        tokens += " (exact, " + self.tokens_method + ")" if self.tokens_exact else f" (estimate: {self.tokens_method})"
        duration = "unknown" if self.estimated_seconds is None else _fmt_seconds(self.estimated_seconds)
        cost = format_cost(self.estimated_cost_usd)
        return [
            f"plan: {self.model} on {self.provider} ({self.gpu}), dataset {self.dataset}",
            f"  {self.examples} examples ({self.eval_examples} held out), batch {self.batch_size} x {self.grad_accum}",
            f"  {self.steps} steps = {self.epochs:g} epoch{'' if self.epochs == 1 else 's'}"
            f" ({self.steps_per_epoch} steps per epoch)",
            f"  {tokens}; {self.tokens_total:,} tokens in all",
            f"  estimated duration {duration} (estimate: {self.throughput_source})",
            f"  estimated cost {cost} (estimate; price: {self.price_source or 'none'})",
            *(f"  note: {n}" for n in self.notes),
        ]


def _fmt_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def load_throughput() -> dict[str, Any]:
    packaged = resources.files("trainkit_core").joinpath("data/throughput.toml")
    with resources.as_file(packaged) as path:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))


def _examples(provider: Any, name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, eval) records of the local copy, else of the synced version on the local data volume."""
    from trainkit_core.datasets.local import find_local
    from trainkit_core.datasets.validate import DatasetInvalidError, check_local

    try:
        local = find_local(Path(provider.settings.datasets.datasets_dir), name)
    except NotFoundError:
        root = getattr(provider.volume("data"), "root", None)
        if root is None:
            raise NotFoundError(
                f"no local copy of dataset {name!r} to plan with",
                hint=f"keep it in {str(provider.settings.datasets.datasets_dir)!r}",
            ) from None
        from trainkit_core.datasets.reader import read_synced

        synced = read_synced(Path(root), name)
        return synced.train, synced.eval
    checked = check_local(local.path)
    if not checked.report.ok():
        raise DatasetInvalidError(checked.report)
    return [e.as_record() for e in checked.train], [e.as_record() for e in checked.eval]


def count_tokens(config: TrainConfig, train: list[dict[str, Any]], *, exact: bool) -> tuple[list[int], bool, str]:
    """Tokens of each training example (as the job encodes it), whether exact, and how counted."""
    import importlib.util

    from trainkit_core.chat_format import get_format, render
    from trainkit_core.presets import TINY_BASE_MODEL

    fmt = get_format(config.chat_format or "gemma3")
    limit = config.max_seq_length or config.preset.max_seq_length
    tokenizer = None
    method = ""
    if exact and importlib.util.find_spec("transformers") is not None:
        if config.model_id == TINY_BASE_MODEL:
            from trainkit_core.tiny_model import build_tokenizer

            tokenizer = build_tokenizer([render(e["messages"], fmt) for e in train], fmt.name)
            method = "the tiny model's tokenizer, built from the dataset as the job builds it"
        else:
            from trainkit_core.datasets.validate import _cached_tokenizer

            tokenizer = _cached_tokenizer(config.model_id)
            tokenizer = getattr(tokenizer, "tokenizer", tokenizer)
            method = f"{config.model_id} tokenizer from the local cache"
    if tokenizer is None:
        counts = [min(limit, math.ceil(len(render(e["messages"], fmt)) / CHARS_PER_TOKEN)) for e in train]
        return counts, False, f"{CHARS_PER_TOKEN} characters per token"
    from trainkit_core.chat_format import encode_for_training

    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.chat_template = fmt.chat_template
    counts = []
    for example in train:
        row = encode_for_training(tokenizer, example["messages"], fmt, max_length=limit)
        if any(label != -100 for label in row["labels"]):
            counts.append(len(row["input_ids"]))  # the job drops an example with no answer left
    return counts, True, method


def measured_throughput(provider: Any, preset: str, gpu: str) -> tuple[float, int] | None:
    """(median tokens/s, runs) of the newest succeeded runs of `preset` on `gpu`, if any."""
    from trainkit_core.runs import RunStore

    found: list[float] = []
    for run in RunStore.for_provider(provider).page(status="succeeded", limit=200, reconcile=False)[0]:
        if run.config.get("model_size") != preset or split_gpu(str(run.config.get("gpu") or ""))[0] != gpu:
            continue
        value = run.metrics.get("tokens_per_s")
        if isinstance(value, (int, float)) and value > 0:
            found.append(float(value))
        if len(found) == MEASURED_RUNS:
            break
    return (statistics.median(found), len(found)) if found else None


def make_plan(provider: Any, config: TrainConfig | dict[str, Any], *, exact: bool = True) -> Plan:
    """The plan of a run of `config` on `provider` (see the module docstring)."""
    if not isinstance(config, TrainConfig):
        config = TrainConfig.parse(config)
    config = config.resolve(gpu_override=provider.settings.compute.gpu)
    train, held_out = _examples(provider, config.dataset)
    from trainkit_core.training.vision_plan import image_counts, text_only

    pictures = image_counts(train)
    counts, tokens_exact, method = count_tokens(config, text_only(train) if any(pictures) else train, exact=exact)
    notes = []
    if any(pictures):
        per_image = config.preset.image_tokens
        if len(counts) == len(pictures):
            counts = [c + n * per_image for c, n in zip(counts, pictures, strict=True)]
        method += f"; plus {per_image} tokens per image (the {config.preset.name} processor's)"
        notes.append(
            f"{sum(pictures)} images in {sum(1 for n in pictures if n)} examples, {per_image} tokens each, counted "
            f"in the tokens; on a GPU a batch of {config.batch_size} with images needs the vision tower's "
            "activations too: lower batch_size (raise grad_accum) if it runs out of memory"
        )
    if len(counts) < len(train):
        notes.append(f"{len(train) - len(counts)} examples have no answer within max_seq_length and are dropped")
    examples = max(1, len(counts))
    batch, accum = config.batch_size or 1, config.grad_accum or 1
    per_epoch = max(1, math.ceil(math.ceil(examples / batch) / accum))
    if config.steps is not None:
        steps = config.steps
        epochs = round(steps / per_epoch, 3)
    else:
        epochs = float(config.epochs or 1.0)
        steps = max(1, math.ceil(epochs * per_epoch))
    tokens_per_epoch = sum(counts)
    tokens_total = round(tokens_per_epoch * steps / per_epoch)

    gpu, gpus = split_gpu(config.gpu or "")
    preset = config.preset_name
    measured = measured_throughput(provider, preset, gpu) if preset else None
    table = load_throughput().get("presets", {}).get(preset, {})
    startup = float(table.get("startup_s", 0.0))
    if measured is not None:
        rate: float | None = measured[0]
        source = f"median of {measured[1]} earlier {preset} run(s) on {gpu}"
    elif isinstance(table.get(gpu), (int, float)):
        rate = float(table[gpu])
        source = f"throughput table {load_throughput().get('date', '')}: {table.get('source', '')}"
    else:
        rate, source = None, f"no throughput figure for {preset or config.model_id} on {gpu}"
    seconds = None if rate is None else round(startup + tokens_total / rate, 1)

    price = price_for_run(provider, config.gpu or "")
    usd = price.get("usd_per_hour")
    cost = None if seconds is None or usd is None else round(seconds / 3600 * max(1, gpus) * float(usd), 6)
    return Plan(
        dataset=config.dataset,
        model=config.model_id,
        preset=preset,
        provider=provider.name,
        gpu=gpu if gpus <= 1 else f"{gpu}:{gpus}",
        examples=len(counts) if tokens_exact else len(train),
        eval_examples=len(held_out),
        batch_size=batch,
        grad_accum=accum,
        steps_per_epoch=per_epoch,
        steps=steps,
        epochs=epochs,
        tokens_per_epoch=tokens_per_epoch,
        tokens_exact=tokens_exact,
        tokens_method=method,
        tokens_total=tokens_total,
        tokens_per_s=rate,
        throughput_source=source,
        estimated_seconds=seconds,
        usd_per_hour=usd,
        gpus=gpus,
        estimated_cost_usd=cost,
        price_source=str(price.get("source") or ""),
        notes=notes,
    )
