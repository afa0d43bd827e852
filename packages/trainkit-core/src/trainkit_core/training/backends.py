"""Training backends: `unsloth` (FastModel, 4-bit, on GPU) and `hf` (transformers + peft + trl).

`select_backend("auto")` takes unsloth when CUDA and unsloth are both there, else hf;
asking for one explicitly forces it (`MissingExtraError` when it is not installed).
Both backends return a peft model with LoRA adapters on the language model's seven
projections, plus the config's `modules_to_save` trained in full (only the tiny presets
set them: their embeddings and head are random, so LoRA alone cannot give them a
vocabulary). An image run with `finetune_vision_layers` also trains the vision layers,
each backend its own way: hf trains the tower and projector in full
(`training.vision.with_vision_modules`), unsloth gets the switch itself (LoRA on the
tower's layers, as Unsloth's vision notebooks do). The models are trained
with trl's `SFTTrainer` on pre-tokenized examples whose labels already carry the
assistant-only mask (`trainkit_core.models.chat_format.encode_for_training`).

On CPU: `use_cpu`, fp32, no gradient checkpointing (it halves CPU speed), no 4-bit,
and a small model on one thread (`small_model_threads`).
Everything heavy is imported inside the functions.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import MissingExtraError, UsageError
from trainkit_core.models.presets import ALL_PROJECTIONS

if TYPE_CHECKING:
    from trainkit_core.training.config import TrainConfig

log = logging.getLogger(__name__)

#: peft `target_modules` as a regex: the seven projections, outside any vision or audio
#: tower (Gemma 4's audio tower has q/k/v/o projections of its own: google/gemma-4-E4B-it).
TARGET_MODULES = rf"^(?!.*(vision|multi_modal|audio)).*\.({'|'.join(ALL_PROJECTIONS)})$"


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def select_backend(requested: str, sharded: bool = False) -> str:
    """The backend a run uses: `requested`, or for `auto` unsloth on CUDA when installed, else hf.

    A `sharded` (fsdp) run takes hf: accelerate does not shard Unsloth's patched model.
    """
    has_unsloth = importlib.util.find_spec("unsloth") is not None
    if requested == "unsloth":
        if not has_unsloth:
            raise MissingExtraError(
                "the unsloth backend needs unsloth installed", hint="pip install 'trainkit-core[gpu]'"
            )
        return "unsloth"
    if requested == "hf":
        return "hf"
    if requested != "auto":
        raise UsageError(f"unknown backend {requested!r}; expected auto, hf or unsloth")
    return "unsloth" if has_unsloth and cuda_available() and not sharded else "hf"


def load_hf(source: str, config: TrainConfig) -> Any:
    """transformers + peft: the base (4-bit on CUDA when asked) with fresh LoRA adapters."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    model = load_base(source, config)
    if bool(config.load_in_4bit) and cuda_available():
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    lora = LoraConfig(
        r=config.lora_r or 8,
        lora_alpha=config.lora_alpha or 16,
        lora_dropout=config.lora_dropout or 0.0,
        target_modules=TARGET_MODULES,
        modules_to_save=list(config.modules_to_save or []) or None,
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def load_unsloth(source: str, config: TrainConfig) -> Any:
    """Unsloth's FastModel: the 4-bit checkpoint on CUDA, LoRA on the layers Unsloth's switches select."""
    import torch
    import unsloth  # noqa: F401  (must be imported before transformers/trl are patched)
    from unsloth import FastLanguageModel, FastModel

    cuda = cuda_available()
    text_only = not model_kind(source).multimodal  # from its configuration, wherever it comes from
    loader = FastLanguageModel if text_only else FastModel
    model, _ = loader.from_pretrained(
        model_name=source,
        max_seq_length=config.max_seq_length,
        load_in_4bit=bool(config.load_in_4bit) and cuda,
        # On CPU Unsloth picks bf16, whose logits drift ~0.03 from the fp32 that inference
        # loads; fp32 matches stock transformers exactly (measured on the tiny model).
        dtype=None if cuda else torch.float32,
        full_finetuning=False,
        **({"device_map": {"": local_gpu()}} if cuda else {}),
    )
    if not cuda:
        _one_thread_if_small(model)
    common = {
        "r": config.lora_r or 8,
        "lora_alpha": config.lora_alpha or 16,
        "lora_dropout": config.lora_dropout or 0.0,
        "bias": "none",
        "random_state": config.seed,
    }
    if config.modules_to_save:
        common["modules_to_save"] = list(config.modules_to_save)
    if text_only:
        return FastLanguageModel.get_peft_model(
            model, target_modules=list(ALL_PROJECTIONS), use_gradient_checkpointing=False, **common
        )
    # Unsloth's own switches (its vision notebooks): `finetune_vision_layers` puts LoRA on the
    # vision tower as well; the real presets leave it off, the twins turn it on.
    switches = {
        "finetune_vision_layers": bool(config.finetune_vision_layers),
        "finetune_language_layers": True,
        "finetune_attention_modules": True,
        "finetune_mlp_modules": True,
    }
    # On CPU, Unsloth's fallback (unsloth_zoo/cpu/loader.py, 2026.10.9) drops these switches and
    # targets every q/k/v/o/gate/up/down_proj by leaf name, towers included: LoRA on Gemma 3's
    # SigLIP q/k/v whatever the switch says, and on Gemma 4 a ValueError for the vision tower's
    # Gemma4ClippableLinear. There it gets the pattern its GPU path builds from the same switches.
    cpu_targets = {} if cuda else {"target_modules": unsloth_target_pattern(model, switches)}
    return FastModel.get_peft_model(
        model,
        **cpu_targets,
        **switches,
        use_gradient_checkpointing="unsloth" if cuda else False,
        **common,
    )


def unsloth_target_pattern(model: Any, switches: dict[str, bool]) -> str:
    """The LoRA targets Unsloth's GPU `get_peft_model` chooses for `switches` (a regex over module names)."""
    from unsloth_zoo.peft_utils import get_peft_regex

    return str(get_peft_regex(model, **switches))


def model_kind(source: str) -> Any:
    """What `source`'s configuration says (`trainkit_core.models.base_models.ModelKind`): text-only or multimodal."""
    from trainkit_core.models.base_models import describe_config, read_folder_config

    if Path(source).is_dir():
        return describe_config(read_folder_config(Path(source)))
    from transformers import AutoConfig

    return describe_config(AutoConfig.from_pretrained(source).to_dict())


def load_model(backend: str, source: str, config: TrainConfig, adapter_dir: Path | None = None) -> Any:
    """The model to train: fresh LoRA adapters, or (`adapter_dir`, `--from`) a trained adapter that trains on."""
    if adapter_dir is not None:
        return load_trained(backend, source, config, adapter_dir)
    return load_unsloth(source, config) if backend == "unsloth" else load_hf(source, config)


def load_base(source: str, config: TrainConfig) -> Any:
    """The base model alone (transformers), as `load_hf` loads it before adding adapters."""
    import torch
    from transformers import AutoModelForCausalLM

    cuda = cuda_available()
    kwargs: dict[str, Any] = {}
    if bool(config.load_in_4bit) and cuda:
        from trainkit_core.models.quantization import bnb_4bit_config
        from trainkit_core.training import sharding
        from trainkit_core.training.distributed import world_size

        # QLoRA with fsdp keeps the 4-bit weights in bf16 storage, which FSDP can shard.
        sharded = world_size(config) > 1 and sharding.choose(config)[0] == "fsdp"
        kwargs["quantization_config"] = bnb_4bit_config(shardable=sharded)
        kwargs["device_map"] = {"": local_gpu()}
    else:
        kwargs["dtype"] = torch.bfloat16 if cuda else torch.float32
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if not cuda:
        _one_thread_if_small(model)
    return model


def local_gpu() -> int:
    """This rank's GPU on its machine (torchrun's ``LOCAL_RANK``): rank N must not load onto GPU 0 too."""
    import os

    return int(os.environ.get("LOCAL_RANK", "0"))


def _one_thread_if_small(model: Any) -> None:
    """A small model trains on one CPU thread, on either backend (`small_model_threads`)."""
    from trainkit_core.inference.loading import small_model_threads

    small_model_threads(model)


def load_trained(backend: str, source: str, config: TrainConfig, adapter_dir: Path) -> Any:
    """The base with a trained adapter (and its fully trained modules), trainable: `--from trained/<id>`.

    Unsloth loads the adapter folder itself (it reads the base from the adapter's
    config, which trainkit checked against the card); the hf backend loads the base and
    the adapter with peft, `is_trainable` so that its weights are not frozen.
    """
    if backend == "unsloth":
        import torch
        import unsloth  # noqa: F401
        from unsloth import FastModel

        cuda = cuda_available()
        model, _ = FastModel.from_pretrained(
            model_name=str(adapter_dir),
            max_seq_length=config.max_seq_length,
            load_in_4bit=bool(config.load_in_4bit) and cuda,
            dtype=None if cuda else torch.float32,  # as `load_unsloth`: fp32 on CPU, as inference loads
            full_finetuning=False,
        )
        if not cuda:
            _one_thread_if_small(model)
        for name, parameter in model.named_parameters():
            if "lora_" in name or "modules_to_save" in name:
                parameter.requires_grad_(True)
        return model
    from peft import PeftModel

    return PeftModel.from_pretrained(load_base(source, config), str(adapter_dir), is_trainable=True)


def build_trainer(
    backend: str,
    model: Any,
    tokenizer: Any,
    train_rows: list[dict[str, list[int]]],
    config: TrainConfig,
    output_dir: Path,
    callbacks: list[Any],
    data_collator: Any = None,
    optimizer: Any = None,
) -> Any:
    """trl's `SFTTrainer` over pre-tokenized rows (labels already masked), or raw rows a `data_collator` batches.

    `optimizer` None lets the trainer build its own (one learning rate for all).
    `config.packing` packs the rows padding-free (`trainkit_core.training.packing`), where
    the model keeps packed examples apart.

    A collator (`trainkit_core.datasets.vision_collator.VisionCollator`) gets its rows as they
    are: trl's own preparation and column removal are off.
    """
    from trl import SFTConfig

    from datasets import Dataset  # type: ignore[attr-defined]  # (mypy sees the repo's datasets/ folder)
    from trainkit_core.training import packing

    if config.packing:
        packing.check_model(model, backend, data_collator)  # never a packed row whose examples see each other
    args = SFTConfig(
        **trainer_arguments(backend, config, output_dir),
        max_length=config.max_seq_length,
        **packing.sft_arguments(bool(config.packing)),
        include_num_input_tokens_seen="non_padding",
        remove_unused_columns=data_collator is None,
        dataset_kwargs={"skip_prepare_dataset": True} if data_collator is not None else None,
    )
    dataset = Dataset.from_list(train_rows)
    trainer = _sft_trainer_class(backend)(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
        data_collator=data_collator,
        optimizers=(optimizer, None),
    )
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # a line per step in the job log; the events carry it all
    return trainer


#: The most logits (batch x length x vocabulary) the CPU loss holds at once: 256 MiB in fp32.
SMALL_LOGITS = 64 * 2**20


def _sft_trainer_class(backend: str) -> Any:
    """trl's `SFTTrainer`; on the hf backend on the CPU, with the loss from the model's logits where they are small.

    trl's fused head projects only the labelled positions where Triton runs; elsewhere it
    projects every position through its tiles, forward and again backward
    (`add_fused_lm_head`, trl 1.16). On the CPU twins that was 14 % of a step, where one
    cross-entropy over the logits costs about 1 %: 300 steps of the shapes demo took 28-39 s
    against 34-48 s. Large logits (a real vocabulary) still go through trl's tiles, which
    never hold them whole. The loss is trl's own: the sum over the labelled tokens divided
    by `num_items_in_batch` (or their count), so gradient accumulation scales it alike.
    trl's entropy and token-accuracy metrics, which trainkit does not report, are not
    computed there. Unsloth keeps its own loss.
    """
    from trl import SFTTrainer

    if backend != "hf":
        return SFTTrainer

    class SFTTrainerOnCpu(SFTTrainer):  # type: ignore[misc]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def]
            vocab = self.model.config.get_text_config().vocab_size  # `model` may be DDP-wrapped
            if self.args.device.type != "cpu" or inputs["labels"].numel() * vocab > SMALL_LOGITS:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            loss = _sum_over_labels(model, inputs, return_outputs, num_items_in_batch)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                # As the Trainer's own loss: `num_items_in_batch` counts every rank's tokens and
                # DDP averages the gradients, so each rank's sum is scaled by the number of ranks.
                scale = self.accelerator.num_processes
                loss = (loss[0] * scale, loss[1]) if return_outputs else loss * scale
            return loss

    return SFTTrainerOnCpu


def _sum_over_labels(model: Any, inputs: dict[str, Any], return_outputs: bool, num_items_in_batch: Any) -> Any:
    import torch

    labels = inputs["labels"]
    outputs = model(**{k: v for k, v in inputs.items() if k != "labels"}, use_cache=False)
    shifted = labels[:, 1:]
    total = torch.nn.functional.cross_entropy(
        outputs.logits[:, :-1].flatten(0, 1).float(), shifted.flatten(), ignore_index=-100, reduction="sum"
    )
    count = (shifted != -100).sum() if num_items_in_batch is None else num_items_in_batch
    # A batch without a labelled token gives a finite zero, not 0 / 0 (as trl's loss does).
    loss = total / torch.as_tensor(count).clamp(min=1)
    return (loss, outputs) if return_outputs else loss


def trainer_arguments(backend: str, config: TrainConfig, output_dir: Path) -> dict[str, Any]:
    """The `TrainingArguments` every method shares (trl's SFT, DPO and GRPO configs extend them)."""
    from trainkit_core.training.distributed import COLLECTIVE_TIMEOUT_S, per_device_batch, world_size

    cuda = cuda_available()
    bf16 = cuda and _bf16_supported()
    world = world_size(config)
    # Several ranks: each takes its per-device batch (`per_device_batch`); gloo on CPU; a bounded collective timeout, so a rank never waits forever on a dead peer.
    distributed = (
        {
            "ddp_backend": "nccl" if cuda else "gloo",
            "ddp_timeout": COLLECTIVE_TIMEOUT_S,
            "ddp_find_unused_parameters": False,
        }
        if world > 1
        else {}
    )
    gradient_checkpointing = cuda and backend == "hf"
    optim = "adamw_8bit" if cuda and config.load_in_4bit else "adamw_torch"
    if world > 1:
        from trainkit_core.training import sharding

        strategy = sharding.choose(config)[0]
        # fsdp replaces the Trainer's gradient checkpointing with its own, and its parameters are
        # DTensor shards, which bitsandbytes' 8-bit optimizer states were never shown to handle.
        distributed.update(sharding.trainer_arguments(strategy, gradient_checkpointing))
        optim = "adamw_torch" if strategy == "fsdp" else optim
    return {
        "output_dir": str(output_dir),
        "max_steps": config.steps if config.steps else -1,
        "num_train_epochs": config.epochs or 1.0,
        "per_device_train_batch_size": per_device_batch(config),
        "gradient_accumulation_steps": config.grad_accum or 1,
        "learning_rate": config.learning_rate or 2e-4,
        "lr_scheduler_type": config.lr_scheduler or "constant",
        "warmup_steps": config.warmup_steps or 0,
        "weight_decay": config.weight_decay or 0.0,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": config.save_every,
        "seed": config.seed,
        "data_seed": config.seed,
        "use_cpu": not cuda,
        "bf16": bf16,
        "fp16": cuda and not bf16,
        "gradient_checkpointing": gradient_checkpointing,
        "optim": optim,
        "report_to": [config.report_to] if config.report_to != "none" else "none",
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        **distributed,
    }


def _bf16_supported() -> bool:
    import torch

    return bool(torch.cuda.is_bf16_supported())
