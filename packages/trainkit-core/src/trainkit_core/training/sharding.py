"""Which strategy a run on several ranks takes (ddp or fsdp), and what sharding asks of the job.

**ddp** keeps a whole copy of the model on every rank and averages the gradients: the
fastest way to add GPUs when the model fits one. **fsdp** (torch's FSDP2, through
accelerate's plugin as the HF Trainer drives it) shards parameters, gradients and optimizer
state over the ranks, each decoder layer gathered only while it computes: what a model
that does not fit one GPU needs. trainkit writes no collective of its own.

`--strategy auto` picks ddp when the model's weights take at most `FITS_SHARE` of one
GPU's memory, else fsdp (`choose`). The weights are the published parameter counts
(`PARAMETERS_B`) at the bytes per parameter of how the run loads them (bf16 2 bytes, 4-bit
about 0.55 with its quantisation constants); the other share is for activations at the
preset's context, the adapters' optimizer state and the CUDA context. That is a rule of
thumb, not a measurement, and the plan says so.

What sharding changes in the job (`trainkit_core.training.job`):

- the adapter and the round-trip logits are gathered by every rank together
  (`gathered_state_dict`; a sharded model's forward is itself a collective), then rank 0
  saves and checks them;
- nothing runs the model on rank 0 alone: no sample generations at checkpoints, and
  `keep_checkpoints` (which scores each checkpoint on rank 0) is refused;
- image runs are refused: their optimizer (the tower at its own rate) is built before
  the trainer shards the model, and would hold the unsharded parameters;
- Unsloth's patched model is not sharded by accelerate; `--backend auto` takes hf.

On a CPU (``--processes``) accelerate never turns its FSDP plugin on (it does so for
accelerator devices only), though torch's ``fully_shard`` runs on gloo: `enable_on_cpu`
sets accelerate's state to FSDP once the Trainer has built it, so the tests here run the
very code path a GPU run takes. On GPUs accelerate's own switch does it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit_core.training.config import TrainConfig

#: Share of one GPU's memory the weights may take for ddp (the rest: activations, optimizer, CUDA).
FITS_SHARE = 0.5

#: Parameters in billions, from each model's card on Hugging Face (google/<id>, read 2026-11).
PARAMETERS_B = {
    "google/gemma-3-4b-it": 4.3,
    "google/gemma-3-12b-it": 12.2,
    "google/gemma-4-E2B-it": 5.1,  # 2.3B effective; the per-layer embeddings are loaded too
    "google/gemma-4-E4B-it": 8.0,  # 4.5B effective
    "google/gemma-4-26B-A4B-it": 25.2,  # every expert is loaded, ~3.8B active per token
    "google/gemma-4-31B-it": 30.7,
}

#: Memory of one GPU in GB, by the names providers use (NVIDIA's data sheets).
GPU_MEMORY_GB = {
    "T4": 16,
    "L4": 24,
    "A10G": 24,
    "L40S": 48,
    "A100": 40,
    "A100-40GB": 40,
    "A100-80GB": 80,
    "H100": 80,
    "H200": 141,
    "B200": 180,
}

#: Bytes per parameter as the run loads the base: 4-bit NF4 with double quantisation, or bf16.
BYTES_4BIT = 0.55
BYTES_BF16 = 2.0


def weights_gb(base_model: str, four_bit: bool) -> float | None:
    """The base model's weights in GB as loaded, or None for a model whose size trainkit does not know."""
    billions = PARAMETERS_B.get(base_model)
    return None if billions is None else round(billions * (BYTES_4BIT if four_bit else BYTES_BF16), 1)


def choose(config: TrainConfig) -> tuple[str, str]:
    """(strategy, why) of a run on several ranks; the config's own choice when it made one."""
    if config.strategy != "auto":
        return config.strategy, "asked for"
    if config.processes > 1:
        return "ddp", "CPU processes: each holds the small model whole"
    gpu = (config.gpu or config.preset.gpu).partition(":")[0].rstrip("!+")
    asked_4bit = config.load_in_4bit  # None: the preset's choice
    four_bit = config.preset.load_in_4bit if asked_4bit is None else asked_4bit
    weights = weights_gb(config.resolved_base_model, four_bit)
    memory = GPU_MEMORY_GB.get(gpu)
    if weights is None or memory is None:
        unknown = config.resolved_base_model if weights is None else f"GPU {gpu or '(none)'}"
        return "ddp", f"the memory of {unknown} is not known to trainkit; --strategy fsdp shards it"
    how = "4-bit" if four_bit else "bf16"
    if weights <= FITS_SHARE * memory:
        return "ddp", f"its weights ({weights:g} GB in {how}) fit one {gpu} ({memory} GB) with room to train"
    return "fsdp", f"its weights ({weights:g} GB in {how}) take over half of one {gpu} ({memory} GB): sharded"


def refusal(config: TrainConfig, strategy: str) -> str | None:
    """Why `config` cannot train with `strategy`, in words, or None."""
    if strategy != "fsdp":
        return None
    if config.backend == "unsloth":
        return "Unsloth's patched model is not sharded by accelerate: use --backend hf (auto takes it) or ddp"
    if config.keep_checkpoints:
        return "keep_checkpoints scores each checkpoint on rank 0 alone, which a sharded model cannot do"
    return None


def trainer_arguments(strategy: str, gradient_checkpointing: bool) -> dict[str, Any]:
    """The Trainer's FSDP2 arguments, or none for ddp.

    Each decoder layer is one shard group (accelerate reads the model's `_no_split_modules`);
    the full state dict is what a checkpoint and the adapter hold, so a run resumes on
    another number of ranks. FSDP's own activation checkpointing replaces the Trainer's.
    """
    if strategy != "fsdp":
        return {}
    return {
        "fsdp": True,
        "fsdp_config": {
            "version": 2,
            "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "state_dict_type": "FULL_STATE_DICT",
            "reshard_after_forward": True,
            "activation_checkpointing": gradient_checkpointing,
        },
        "gradient_checkpointing": False,
    }


def enable_on_cpu(trainer: Any) -> None:
    """Turn accelerate's FSDP plugin on for a CPU run that asked for fsdp (a GPU run has it already).

    The Trainer built its plugin arguments from `trainer_arguments`; accelerate declined them
    because the device is a CPU. Its state is shared by every `AcceleratorState()` in the
    process and refreshed from `PartialState`'s, so both are set.
    """
    if trainer.is_fsdp_enabled or not trainer.args.fsdp_plugin_args:
        return
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    plugin = FullyShardedDataParallelPlugin(**trainer.args.fsdp_plugin_args)
    state = trainer.accelerator.state
    state.fsdp_plugin = plugin
    state.distributed_type = DistributedType.FSDP
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    trainer.is_fsdp_enabled = True


def gathered_state_dict(trainer: Any) -> dict[str, Any] | None:
    """The sharded model's whole state dict on rank 0 (every rank must call it), or None outside fsdp."""
    if not trainer.is_fsdp_enabled:
        return None
    return dict(trainer.accelerator.get_state_dict(trainer.model))


def held_parameters(model: Any) -> tuple[int, int]:
    """(parameters this rank holds, parameters of the model): what sharding saved, for the run's events."""
    held = total = 0
    for parameter in model.parameters():
        local = parameter.to_local() if hasattr(parameter, "to_local") else parameter  # a DTensor's own shard
        held += local.numel()
        total += parameter.numel()
    return held, total
