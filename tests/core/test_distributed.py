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


def test_fsdp_is_refused_until_it_runs() -> None:
    with pytest.raises(UsageError, match="strategy fsdp is not implemented"):
        TrainConfig.parse({"dataset": "demo", "strategy": "fsdp"})


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
