"""A run's plan before launch: what it will train, for how long, at what cost.

`make_plan(provider, config)` answers with a `Plan`: the examples, epochs and steps,
the tokens of one epoch, the GPU, an estimated duration and an estimated cost.

- **Tokens** are counted exactly (``tokens_exact``) with the model's own tokenizer
  when it is on this machine: the tiny preset's is built from the dataset exactly as
  the job builds it, a real model's is read from the local Hugging Face cache (never
  downloaded). Otherwise (``exact=False``, no training stack, no cached tokenizer) they
  are estimated at `CHARS_PER_TOKEN` characters per token and labelled as an estimate.
- **Duration**: the tokens to train over a throughput (tokens/s) for the preset on
  that GPU: the median of earlier succeeded runs of the same preset, GPU and method (their
  ``tokens_per_s`` metric), else of the preset's runs of other methods, else
  ``data/throughput.toml`` (dated, with its sources), plus the table's start-up time.
- **Cost**: the duration at the price a run would record (`trainkit_core.runs.pricing`).
- **No account needed**: the provider's store is read only for the median of earlier
  runs, within `STORE_WAIT_S`; when it cannot be read (no token, no network) the plan
  says so and uses the table, so a would-be cloud user sees the cost before signing up.
- **No GPU**: on a provider without GPUs (local) a GPU preset runs on this machine's
  CUDA device if it has one, else on its CPU; the plan says which, not the preset's GPU.
- **Per method** (`work_per_token`): DPO trains on both answers of each pair and adds
  the reference's forward pass (about a third of a training step's work per token);
  GRPO generates `num_generations` completions of up to `max_completion_length` tokens
  per prompt, token by token, before it trains on them. Both are stated as estimates,
  and left out where the rate is the same method's measured one (it holds that cost).

The dataset is the local copy (``TRAINKIT_DATASETS_DIR``), else the synced one on a
local provider's data volume. No heavy imports unless an exact count needs them.
"""

from __future__ import annotations

import math
import statistics
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from trainkit_core.datasets.validate import CHARS_PER_TOKEN
from trainkit_core.errors import NotFoundError, TrainkitError
from trainkit_core.runs.pricing import price_for_run, split_gpu
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.distributed import per_device_batch, world_size
from trainkit_core.training.methods import get_method

if TYPE_CHECKING:
    from trainkit_core.training.submit import CheckedRequest

#: Share of linear speed-up the plan assumes for N GPUs: an assumption, see `make_plan`.
SCALING_EFFICIENCY = 0.9
#: Earlier runs a measured throughput is taken from (the newest).
MEASURED_RUNS = 5
#: Seconds a plan waits for the provider's store before planning without earlier runs
#: (Modal's client retries an unreachable server for about a minute).
STORE_WAIT_S = 10.0


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
    #: Ranks that train the run: GPUs per node x nodes, or CPU processes; 1 for a one-device run.
    world_size: int = 1
    #: Examples (GRPO: completions) each rank takes per micro-batch.
    per_device_batch: int = 1
    #: Examples per optimizer step over all ranks: per-device batch x accumulation x world size.
    global_batch: int = 1
    #: How the ranks split the work, and why (empty for one device).
    strategy: str = ""

    def lines(self) -> list[str]:
        """The plan as a person reads it (the CLI prints these)."""
        from trainkit_core.runs.pricing import format_cost

        tokens = f"{self.tokens_per_epoch:,} tokens per epoch"
        tokens += " (exact, " + self.tokens_method + ")" if self.tokens_exact else f" (estimate: {self.tokens_method})"
        duration = "unknown" if self.estimated_seconds is None else _fmt_seconds(self.estimated_seconds)
        cost = format_cost(self.estimated_cost_usd)
        return [
            f"plan: {self.model} on {self.provider} ({self.gpu}), dataset {self.dataset}",
            f"  {self.examples} examples ({self.eval_examples} held out), batch {self.batch_size} x {self.grad_accum}",
            f"  global batch {self.global_batch} = per-device batch {self.per_device_batch} x accumulation "
            f"{self.grad_accum} x world size {self.world_size}",
            *([f"  strategy {self.strategy}"] if self.strategy else []),
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


def _examples(provider: Any, request: CheckedRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, eval) records of the checked local copy, else of the synced version on the local data volume."""
    from trainkit_core.datasets.validate import DatasetInvalidError, check_local

    name = request.config.dataset
    if request.local is None:
        root = getattr(provider.volume("data"), "root", None)
        if root is None:
            raise NotFoundError(
                f"no local copy of dataset {name!r} to plan with",
                hint=f"keep it in {str(provider.settings.datasets.datasets_dir)!r}",
            )
        from trainkit_core.datasets.reader import read_synced

        synced = read_synced(Path(root), name)
        return synced.train, synced.eval
    checked = check_local(request.local.path)
    if not checked.report.ok():
        raise DatasetInvalidError(checked.report)
    return [e.as_record() for e in checked.train], [e.as_record() for e in checked.eval]


def count_tokens(config: TrainConfig, train: list[dict[str, Any]], *, exact: bool) -> tuple[list[int], bool, str]:
    """Tokens of each training example (as the job encodes it), whether exact, and how counted."""
    import importlib.util

    from trainkit_core.models.chat_format import get_format, render_example
    from trainkit_core.models.presets import TINY_BASE_MODEL

    fmt = get_format(config.chat_format or "gemma3")
    limit = config.max_seq_length or config.preset.max_seq_length
    tokenizer = None
    method = ""
    if exact and importlib.util.find_spec("transformers") is not None:
        if config.resolved_base_model == TINY_BASE_MODEL:
            from trainkit_core.models.tiny_model import build_tokenizer

            tokenizer = build_tokenizer([render_example(e, fmt) for e in train], fmt.name)
            method = "the tiny model's tokenizer, built from the dataset as the job builds it"
        else:
            from trainkit_core.datasets.validate import _cached_tokenizer

            tokenizer = _cached_tokenizer(config.resolved_base_model)
            tokenizer = getattr(tokenizer, "tokenizer", tokenizer)
            method = f"{config.resolved_base_model} tokenizer from the local cache"
    if tokenizer is None:
        counts = [
            min(limit, math.ceil(len(render_example(e, fmt, keep_thinking=config.keep_thinking)) / CHARS_PER_TOKEN))
            for e in train
        ]
        return counts, False, f"{CHARS_PER_TOKEN} characters per token"
    from trainkit_core.models.chat_format import encode_example

    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.chat_template = fmt.chat_template
    counts = []
    for example in train:
        row = encode_example(tokenizer, example, fmt, max_length=limit, keep_thinking=config.keep_thinking)
        if any(label != -100 for label in row["labels"]):
            counts.append(len(row["input_ids"]))  # the job drops an example with no answer left
    return counts, True, method


def measured_throughput(provider: Any, preset: str, gpu: str, method: str) -> tuple[float, int, bool] | None:
    """(median tokens/s, runs, whether they are `method`'s) of the newest succeeded runs of `preset` on `gpu`.

    Runs of the same method come first: their tokens/s already holds what a token costs
    that method (GRPO's generation, DPO's reference pass), which the plan otherwise has
    to assume (`Method.work`). A GRPO plan measured by SFT runs was off by that guess.
    """
    from trainkit_core.runs.training_run import RunStore

    own: list[float] = []
    other: list[float] = []
    for run in RunStore.for_provider(provider).page(status="succeeded", limit=200, reconcile=False)[0]:
        if run.config.get("model_size") != preset or split_gpu(str(run.config.get("gpu") or ""))[0] != gpu:
            continue
        value = run.metrics.get("tokens_per_s")
        if isinstance(value, (int, float)) and value > 0:
            (own if (run.config.get("method") or "sft") == method else other).append(float(value))
        if len(own) == MEASURED_RUNS:
            break
    found = own or other[:MEASURED_RUNS]
    return (statistics.median(found), len(found), bool(own)) if found else None


def measured_if_reachable(
    provider: Any, preset: str, gpu: str, method: str
) -> tuple[tuple[float, int, bool] | None, str | None]:
    """`measured_throughput`, or (None, why) when the provider's store cannot be read in time.

    A daemon thread, so that a client stuck retrying neither holds the plan nor the
    process's exit.
    """
    import threading

    answer: dict[str, Any] = {}

    def read() -> None:
        try:
            answer["value"] = measured_throughput(provider, preset, gpu, method)
        except TrainkitError as exc:
            answer["error"] = exc
        except BaseException as exc:  # raised again below; an abandoned reader's dies with it at exit
            answer["crash"] = exc

    reader = threading.Thread(target=read, name="plan-store", daemon=True)
    reader.start()
    reader.join(STORE_WAIT_S)
    fallback = "the estimate comes from the throughput table, not from earlier runs"
    if reader.is_alive():
        return None, f"the {provider.name} store did not answer within {STORE_WAIT_S:g} s; {fallback}"
    if "crash" in answer:
        raise answer["crash"]
    if "error" in answer:
        return None, f"the {provider.name} store is not reachable ({answer['error'].message}); {fallback}"
    return answer["value"], None


def cuda_device_name() -> str | None:
    """This machine's first CUDA device, when torch is installed and sees one (no import otherwise)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return str(torch.cuda.get_device_name(0)) if torch.cuda.is_available() else None


def make_plan(
    provider: Any, config: TrainConfig | dict[str, Any] | CheckedRequest, *, exact: bool = True, strict: bool = False
) -> Plan:
    """The plan of a run of `config` on `provider` (see the module docstring).

    `config` goes through the start's own checks (`check_request`) unless it is their
    answer already, so a plan is refused exactly where the start would be.
    """
    from trainkit_core.training.submit import CheckedRequest, check_request

    request = config if isinstance(config, CheckedRequest) else check_request(provider, config, strict=strict)
    config = request.config
    train, held_out = _examples(provider, request)
    from trainkit_core.training.vision_plan import audio_token_counts, image_counts, text_only

    training_method = get_method(config.method)
    conversations = training_method.as_conversations(train)
    pictures = image_counts(conversations)
    sounds = audio_token_counts(conversations, request.local.path if request.local is not None else None)
    counts, tokens_exact, method = count_tokens(
        config, text_only(conversations) if any(pictures) or any(sounds) else conversations, exact=exact
    )
    notes = []
    if any(sounds):
        if len(counts) == len(sounds):
            counts = [c + n for c, n in zip(counts, sounds, strict=True)]
        method += "; plus each sound's tokens (one per 40 ms, from its length)"
        notes.append(f"{sum(sounds):,} audio tokens in {sum(1 for n in sounds if n)} examples, counted in the tokens")
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
    counts, work, method_notes = training_method.work(config, counts, train)
    notes.extend(method_notes)
    notes.extend(config.preset.plan_notes)
    if len(counts) < len(train):
        notes.append(f"{len(train) - len(counts)} examples have no answer within max_seq_length and are dropped")
    examples = max(1, len(counts))
    if config.packing and training_method.packing:
        # trl packs the examples into rows before batching: the steps count packed rows.
        from trainkit_core.training.packing import packed_rows

        capacity = config.max_seq_length or config.preset.max_seq_length
        examples = max(1, packed_rows(counts, capacity))
        notes.append(
            f"--packing: {len(counts)} examples in {examples} packed rows of up to {capacity} tokens"
            + ("" if tokens_exact else " (from the estimated token counts)")
            + f"; batch_size {config.batch_size or 1} counts rows"
        )
    batch, accum = config.batch_size or 1, config.grad_accum or 1
    batch = training_method.micro_batch(config, batch)  # GRPO's counts completions: whole groups
    # `--gpus`/`--nodes` multiply the per-device batch; `--processes` (E1's CPU ranks) splits
    # batch_size, which stays the global batch of a micro-step there.
    world = world_size(config)
    per_device = per_device_batch({"batch_size": batch, "processes": config.processes})
    global_batch = per_device * accum * world
    per_epoch = max(1, math.ceil(examples * training_method.completions_per_example(config) / global_batch))
    strategy = ""
    if world > 1:
        from trainkit_core.training.sharding import choose

        chosen, why = choose(config)
        holds = "a whole copy of the model" if chosen == "ddp" else f"1/{world} of the model's weights and states"
        backend: str = config.backend if config.backend != "auto" else "unsloth where installed on CUDA, else hf"
        if chosen == "fsdp":
            backend = "hf (accelerate does not shard Unsloth's model)"
        strategy = f"{chosen} on {world} ranks ({why}): each holds {holds}; backend {backend}"
        if chosen == "fsdp" and config.load_in_4bit and config.gpus * config.nodes > 1:
            notes.append(
                "QLoRA with fsdp: the 4-bit weights are stored as bf16 so that FSDP can shard them "
                "(bitsandbytes' FSDP-QLoRA); never run by trainkit on real GPUs"
            )
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
    if gpu != "cpu" and not provider.capabilities.gpu:
        device = cuda_device_name()
        notes.append(
            f"{provider.name} has no cloud GPUs: the {preset or config.resolved_base_model} preset (made for {config.gpu}) "
            + (
                f"would train on this machine's {device}"
                if device
                else "would train on this machine's CPU, far too slowly for a model of this size; "
                "use a provider with GPUs (--provider modal), or --model-size tiny to try things on a CPU"
            )
        )
        gpu, gpus = (device, 1) if device else ("cpu", 0)
    measured, store_note = measured_if_reachable(provider, preset, gpu, config.method) if preset else (None, None)
    if store_note:
        notes.append(store_note)
    table = load_throughput().get("presets", {}).get(preset, {})
    startup = float(table.get("startup_s", 0.0))
    if measured is not None:
        rate: float | None = measured[0]
        if measured[2]:
            work = 1.0  # their tokens/s holds the method's own cost per token
            source = f"median of {measured[1]} earlier {preset} {config.method} run(s) on {gpu}"
        else:
            source = f"median of {measured[1]} earlier {preset} run(s) of other methods on {gpu}"
    elif isinstance(table.get(gpu), (int, float)):
        rate = float(table[gpu])
        source = f"throughput table {load_throughput().get('date', '')}: {table.get('source', '')}"
    else:
        rate, source = None, f"no throughput figure for {preset or config.resolved_base_model} on {gpu}"
    if rate is not None and config.gpus * config.nodes > 1:
        # ASSUMPTION, not measured: DDP keeps about 90% of linear scaling on one NVLink node (PyTorch's
        # DDP paper, Li et al. 2020, reports ~90% and above for large models); never measured by trainkit.
        rate = rate * config.gpus * config.nodes * SCALING_EFFICIENCY
        source += f"; x {config.gpus * config.nodes} GPUs at {SCALING_EFFICIENCY:.0%} scaling efficiency (assumption)"
    seconds = None if rate is None else round(startup + tokens_total * work / rate, 1)

    price = price_for_run(provider, "" if gpu == "cpu" else config.gpu or "")
    usd = price.get("usd_per_hour")
    if usd is not None and float(usd) == 0.0:
        cost: float | None = 0.0  # free (the local provider): however long it takes
    else:
        cost = (
            None
            if seconds is None or usd is None
            else round(seconds / 3600 * max(1, gpus) * config.nodes * float(usd), 6)
        )
    return Plan(
        dataset=config.dataset,
        model=config.resolved_base_model,
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
        world_size=world,
        per_device_batch=per_device,
        global_batch=global_batch,
        strategy=strategy,
    )
