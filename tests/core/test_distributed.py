"""Several processes without training: the config's processes and strategy, and how a dead rank is named."""

from __future__ import annotations

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.distributed import failure_text, world_size

TORCHRUN_SUMMARY = """\
Root Cause (first observed failure):
[0]:
  time      : 2026-12-05_08:41:11
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 20517)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 20517
=======================================================
"""


def test_the_global_batch_must_divide_by_the_processes() -> None:
    with pytest.raises(UsageError, match=r"batch_size 3 is the global batch.*multiple of processes 2"):
        TrainConfig.parse({"dataset": "demo", "processes": 2, "batch_size": 3})
    assert world_size(TrainConfig.parse({"dataset": "demo", "processes": 2, "batch_size": 4})) == 2
    assert world_size({"dataset": "demo"}) == 1


def test_fsdp_needs_several_ranks_and_a_backend_it_can_shard() -> None:
    with pytest.raises(UsageError, match="strategy fsdp shards the model over several ranks"):
        TrainConfig.parse({"dataset": "demo", "strategy": "fsdp"})
    with pytest.raises(UsageError, match="Unsloth's patched model is not sharded"):
        TrainConfig.parse({"dataset": "demo", "strategy": "fsdp", "processes": 2, "backend": "unsloth"})
    with pytest.raises(UsageError, match="keep_checkpoints scores each checkpoint on rank 0"):
        TrainConfig.parse({"dataset": "demo", "strategy": "fsdp", "processes": 2, "keep_checkpoints": 2})
    assert TrainConfig.parse({"dataset": "demo", "strategy": "fsdp", "processes": 2}).strategy == "fsdp"


@pytest.mark.parametrize(
    ("size", "gpu", "four_bit", "expected"),
    [
        ("31b", "A100-80GB:2", True, "ddp"),  # 4-bit: 16.9 GB of 80
        ("31b", "A100-80GB:2", False, "fsdp"),  # bf16: 61.4 GB of 80
        ("31b", "H200:2", False, "ddp"),  # 61.4 of 141
        ("12b", "A100:2", False, "fsdp"),  # 24.4 of 40
        ("4b", "A10G:2", False, "ddp"),  # 8.6 of 24
    ],
)
def test_auto_shards_what_does_not_fit_one_gpu(size: str, gpu: str, four_bit: bool, expected: str) -> None:
    from trainkit_core.training.sharding import choose

    config = TrainConfig.parse({"dataset": "demo", "model_size": size, "gpu": gpu, "load_in_4bit": four_bit}).resolve()
    strategy, why = choose(config)
    assert strategy == expected, why
    assert ("fit one" in why) == (expected == "ddp") and "GB" in why


def test_auto_says_why_when_it_cannot_weigh_the_model() -> None:
    from trainkit_core.training.sharding import choose

    config = TrainConfig.parse({"dataset": "demo", "base_model": "someone/model-7b", "gpu": "H100:2"}).resolve()
    assert choose(config) == (
        "ddp",
        "the memory of someone/model-7b is not known to trainkit; --strategy fsdp shards it",
    )
    assert choose(config.model_copy(update={"strategy": "fsdp"})) == ("fsdp", "asked for")
    cpu = TrainConfig.parse({"dataset": "demo", "processes": 2}).resolve()
    assert choose(cpu)[0] == "ddp"


def test_fsdp_arguments_shard_each_layer_and_keep_full_checkpoints() -> None:
    from trainkit_core.training.sharding import trainer_arguments

    assert trainer_arguments("ddp", True) == {}
    args = trainer_arguments("fsdp", True)
    assert args["fsdp"] is True and args["gradient_checkpointing"] is False
    assert args["fsdp_config"]["version"] == 2 and args["fsdp_config"]["activation_checkpointing"] is True
    assert args["fsdp_config"]["state_dict_type"] == "FULL_STATE_DICT"


def test_the_dead_rank_is_named_from_torchruns_summary() -> None:
    lines = ["rank 0 training\n", *TORCHRUN_SUMMARY.splitlines(keepends=True)]
    assert failure_text(lines, 1, 2) == "rank 1 of 2 failed (exit code -9, killed by SIGKILL)"
    assert failure_text(["no summary\n"], 1, 2) == "one of 2 ranks failed (launcher exit code 1)"


def test_a_muted_rank_never_writes_the_real_store(tmp_path) -> None:
    """Ranks above 0 share the run's store only for reading: batch writes (events) stay in the rank too."""
    from trainkit_core.toolkit.kv_values import get_many, put_many
    from trainkit_core.toolkit.sqlite_kv import LocalKV
    from trainkit_core.training.rank import _MutedKV

    real = LocalKV(tmp_path, "runs")
    real.put("run-a/1", {"from": "rank 0"})
    muted = _MutedKV(real)
    put_many(muted, {"run-a/1": {"from": "rank 1"}, "run-a/2": {"from": "rank 1"}})
    muted.put("run-a/3", {"from": "rank 1"})
    assert real.items("run-a/") == [("run-a/1", {"from": "rank 0"})]
    assert get_many(muted, ["run-a/1", "run-a/2", "run-a/3"]) == {
        "run-a/1": {"from": "rank 1"},
        "run-a/2": {"from": "rank 1"},
        "run-a/3": {"from": "rank 1"},
    }


@pytest.mark.parametrize(("four_bit", "strategy"), [(True, "ddp"), (False, "fsdp")])
def test_gpu_trainer_arguments_follow_the_strategy(
    monkeypatch: pytest.MonkeyPatch, tmp_path, four_bit: bool, strategy: str
) -> None:
    """What a 2-GPU run of 31b asks of the Trainer (no GPU here: the CUDA checks answer as on one)."""
    from trainkit_core.training import backends

    monkeypatch.setattr(backends, "cuda_available", lambda: True)
    monkeypatch.setattr(backends, "_bf16_supported", lambda: True)
    config = TrainConfig.parse(
        {"dataset": "demo", "model_size": "31b", "gpu": "A100-80GB:2", "load_in_4bit": four_bit}
    ).resolve()
    args = backends.trainer_arguments("hf", config, tmp_path)
    assert args["ddp_backend"] == "nccl" and args["per_device_train_batch_size"] == config.batch_size
    if strategy == "ddp":  # QLoRA fits: a copy per GPU, the Trainer's checkpointing, 8-bit Adam
        assert "fsdp" not in args and args["gradient_checkpointing"] is True and args["optim"] == "adamw_8bit"
    else:  # bf16 does not: sharded, FSDP's own activation checkpointing, plain AdamW on the shards
        assert args["fsdp"] is True and args["fsdp_config"]["activation_checkpointing"] is True
        assert args["gradient_checkpointing"] is False and args["optim"] == "adamw_torch"
