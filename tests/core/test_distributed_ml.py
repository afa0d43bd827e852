"""One run on two CPU processes: torchrun's ranks over gloo, the code path N GPUs take.

A 2-process SFT run of tiny, and one of the Gemma 3 vision twin on pictures, with global
batch 2 (one example per rank and step) is compared with a 1-process run of batch 2 over the
same data order: same first and last loss and the same adapter weights, within a tolerance (gloo's all-reduce sums in another order than one
process's backward, so bit equality is not expected). The run looks like any other: one
record, one adapter of the usual kind, its events saying it ran on 2 processes. A rank
killed with SIGKILL fails the run with that rank named, and nothing hangs.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.ml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

#: Relative tolerance of the losses and of the adapter weights between 1 and 2 processes.
#: Measured differences are float32 rounding (about 1e-6); 1e-3 still fails a changed data
#: order or a doubled batch, which move the losses by several percent.
TOLERANCE = 1e-3


def _provider(root: Path) -> Any:
    from trainkit_core import get_provider
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    settings = Settings(
        provider=ProviderSettings(home=root / "home"), datasets=DatasetSettings(datasets_dir=root / "datasets")
    )
    return get_provider("local", settings)


@pytest.fixture
def local(tmp_path: Path) -> Any:
    return _provider(tmp_path)


@dataclass
class Reference:
    """A finished one-process run that several tests compare with (trained once per module: CI time)."""

    metrics: dict[str, Any]
    step: int
    adapter: dict[str, Any]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Reference]:
    """The one-process run of a reference recipe (`text`, `pictures` or `straight`), trained on first use."""
    from trainkit_core.training.submit import start_run

    provider = _provider(tmp_path_factory.mktemp("one-process"))
    done: dict[str, Reference] = {}

    def reference(name: str) -> Reference:
        if name not in done:
            recipes = {
                "text": lambda: dict(RECIPE),
                "pictures": lambda: _shapes(provider),
                "straight": lambda: STRAIGHT,
            }
            # Started inside a test, whose environment tests/conftest.py has made offline.
            run = start_run(provider, recipes[name]()).wait(timeout=600)
            assert run.status == "succeeded", run.error_message
            done[name] = Reference(dict(run.metrics), run.step or 0, _adapter(provider, run.id))
        return done[name]

    return reference


def _adapter(local: Any, run_id: str) -> dict[str, Any]:
    from safetensors.torch import load_file

    from trainkit_core.local.plugin import job_context
    from trainkit_core.models.trained.paths import trained_dir

    folder = job_context(local.settings, "test").path("models") / trained_dir(run_id)
    return load_file(str(folder / "adapter_model.safetensors"))


RECIPE = {"dataset": "demo", "steps": 4, "batch_size": 2, "save_every": 1000, "learning_rate": 1e-3}


def _shapes(local: Any) -> dict[str, Any]:
    """The Gemma 3 vision twin on a small generated pictures dataset (`scripts/make_shapes_dataset.py`)."""
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "scripts" / "make_shapes_dataset.py"
    spec = importlib.util.spec_from_file_location("make_shapes_dataset", script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write(Path(local.settings.datasets.datasets_dir) / "shapes", train_per_class=2, eval_per_class=1)
    return {**RECIPE, "dataset": "shapes", "model_size": "tiny-gemma3mm"}


@pytest.mark.parametrize(("data", "strategy"), [("text", "ddp"), ("pictures", "ddp"), ("text", "fsdp")])
def test_two_processes_train_the_same_adapter_as_one(
    local: Any, one_process: Callable[[str], Reference], data: str, strategy: str
) -> None:
    """fsdp runs accelerate's FSDP2 path (each rank holds half of every layer) and must learn what ddp does."""
    import torch

    from trainkit_core.training.submit import start_run

    recipe = dict(RECIPE) if data == "text" else _shapes(local)
    one = one_process(data)
    two = start_run(local, {**recipe, "processes": 2, "strategy": strategy}).wait(timeout=600)
    assert two.status == "succeeded", two.error_message
    assert two.config["processes"] == 2 and two.step == one.step == 4
    for key in ("first_loss", "final_loss"):
        assert two.metrics[key] == pytest.approx(one.metrics[key], rel=TOLERANCE), key
    a, b = one.adapter, _adapter(local, two.id)
    assert a.keys() == b.keys()
    # The pictures run trains the vision tower in full. Some of its parameters have a true
    # gradient of zero (a key bias: the softmax ignores it), so their gradient is rounding noise,
    # which Adam normalises into moves of up to lr per step: those may differ by 1% of lr x steps.
    atol = 1e-6 if data == "text" else 0.01 * recipe["learning_rate"] * recipe["steps"]
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=TOLERANCE, atol=atol), name
    # One run of the usual kind: its events say it ran on 2 processes, written once (by rank 0).
    events = list(local_store(local).events(two.id).read())
    said = [e for e in events if e.get("processes") == 2]
    assert len(said) == 1 and said[0]["strategy"] == strategy, said
    held = [e for e in events if "held" in e]
    if strategy == "fsdp":  # each of 2 ranks held about half (a layer's rows split in two)
        assert len(held) == 1 and 0.4 < held[0]["held"] / held[0]["total"] < 0.6, held
    else:
        assert not held
    progress = [e for e in events if e["type"] == "progress"]
    assert progress and all(len(e["memory_mb_ranks"]) == 2 and min(e["memory_mb_ranks"]) > 0 for e in progress)
    assert progress[-1]["memory_mb_ranks"][0] <= progress[-1]["memory_mb"]  # rank 0 (its peak, read a moment later)
    assert sum(1 for e in events if e.get("type") == "status" and e.get("status") == "succeeded") == 1


def _cli_env(local: Any) -> dict[str, str]:
    return {
        "TRAINKIT_HOME": str(local.settings.provider.home),
        "TRAINKIT_DATASETS_DIR": str(local.settings.datasets.datasets_dir),
    }


def local_store(local: Any) -> Any:
    from trainkit_core.runs.training_run import RunStore

    return RunStore.for_provider(local)


def _rank_pids(run_id: str) -> list[int]:
    """Pids of the processes running a rank of `run_id` (torchrun's workers), from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        rank = b"trainkit_core.training.rank" in command and b"torch.distributed.run" not in command
        if rank and run_id.encode() in command:
            pids.append(int(entry.name))
    return pids


def _training_on_two_ranks(local: Any) -> Any:
    """A long 2-process run, once both ranks are past their first step."""
    from trainkit_core.training.submit import start_run

    handle = start_run(local, {**RECIPE, "steps": 1000, "processes": 2})
    store = local_store(local)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # until the ranks train
        run = store.get(handle.id)
        if run.step and run.step >= 1 and len(_rank_pids(run.id)) == 2:
            return handle
        assert not run.ended(), run.error_message
        time.sleep(0.5)
    pytest.fail("the ranks never started training")


def test_stop_reaches_both_ranks_and_one_adapter_is_saved(local: Any) -> None:
    handle = _training_on_two_ranks(local)
    local_store(local).get(handle.id).stop()
    run = handle.wait(timeout=300)
    assert run.status == "stopped", run.error_message
    assert 1 <= run.step < 1000
    assert _adapter(local, run.id)  # the one adapter, of the usual kind
    _ranks_end(handle.id)  # no rank left waiting for the other


def _ranks_end(run_id: str) -> None:
    """The ranks exit once the run ended (they may take a moment to finish their writes)."""
    deadline = time.monotonic() + 120
    while _rank_pids(run_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _rank_pids(run_id), "a rank of the ended run is still running"


def test_a_killed_rank_fails_the_run_naming_it(local: Any) -> None:
    handle = _training_on_two_ranks(local)
    victim = max(_rank_pids(handle.id))  # one rank, whichever
    os.kill(victim, signal.SIGKILL)
    run = handle.wait(timeout=300)
    assert run.status == "failed"
    assert "rank" in (run.error_message or "") and "SIGKILL" in (run.error_message or ""), run.error_message
    _ranks_end(handle.id)


#: A constant learning rate and no dropout: a run resumed at step 4 then follows the same
#: trajectory as one that never stopped (a schedule depends on the step count, dropout on
#: each rank's random state, which a checkpoint of another world size cannot restore).
RESUMABLE = {**RECIPE, "save_every": 2, "lr_scheduler": "constant", "warmup_steps": 0, "lora_dropout": 0.0}
#: The run that never stopped, which a run resumed at step 4 must match.
STRAIGHT = {**RESUMABLE, "steps": 8}


@pytest.mark.parametrize(("first", "then"), [(2, 1), (1, 2)])
def test_a_checkpoint_resumes_on_another_number_of_processes(
    local: Any, one_process: Callable[[str], Reference], first: int, then: int
) -> None:
    import torch
    from cli_helpers import run_main

    from trainkit_core.training.submit import resume_run, start_run

    straight = one_process("straight")
    half = start_run(local, {**RESUMABLE, "steps": 4, "processes": first}).wait(timeout=600)
    assert half.status == "succeeded", half.error_message
    if then == 2:  # as a user asks for it
        code, output = run_main(
            "--provider", "local", "runs", "resume", half.id, "--steps", "8", "--processes", "2", env=_cli_env(local)
        )
        assert code == 0, output
        run = local_store(local).get(half.id)
        code, shown = run_main("--provider", "local", "runs", "show", half.id, env=_cli_env(local))
        assert code == 0 and "processes 2 (CPU ranks over gloo, strategy auto: ddp)" in shown, shown
    else:
        run = resume_run(local, half.id, steps=8, processes=then).wait(timeout=600)
    assert run.status == "succeeded", run.error_message
    assert run.step == 8 and run.config["processes"] == then and run.metadata["resumed_from_step"] == 4
    assert run.metrics["final_loss"] == pytest.approx(straight.metrics["final_loss"], rel=TOLERANCE)
    a, b = straight.adapter, _adapter(local, run.id)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=TOLERANCE, atol=1e-6), name


def test_a_sharded_checkpoint_resumes_sharded_and_only_so(local: Any, one_process: Callable[[str], Reference]) -> None:
    """fsdp's checkpoint (the full adapter, FSDP's optimizer state) resumes on ranks that shard again."""
    import torch

    from trainkit_core.errors import UsageError
    from trainkit_core.training.submit import resume_run, start_run

    straight = one_process("straight")
    half = start_run(local, {**RESUMABLE, "steps": 4, "processes": 2, "strategy": "fsdp"}).wait(timeout=600)
    assert half.status == "succeeded", half.error_message
    with pytest.raises(UsageError, match="strategy fsdp shards the model over several ranks"):
        resume_run(local, half.id, steps=8, processes=1)
    run = resume_run(local, half.id, steps=8).wait(timeout=600)
    assert run.status == "succeeded", run.error_message
    assert run.step == 8 and run.metadata["resumed_from_step"] == 4
    assert run.metrics["final_loss"] == pytest.approx(straight.metrics["final_loss"], rel=TOLERANCE)
    a, b = straight.adapter, _adapter(local, run.id)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=TOLERANCE, atol=1e-6), name
