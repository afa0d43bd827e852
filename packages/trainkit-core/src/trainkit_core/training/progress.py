"""The training callback: progress events, the stop flag, checkpoints on the models volume.

`Reporter` holds the logic and imports nothing heavy (it is tested without torch);
`make_callback(reporter)` wraps it in a transformers `TrainerCallback`.

- Progress events (`progress`: step, total_steps, loss, learning_rate, grad_norm,
  epoch, tokens_per_s, eta_s, memory_mb, and a method's own figures: DPO's rewards and
  margin, GRPO's reward per grader, KL, completion length) go to the run's event log at most every
  `event_interval_s`, and always for the first and the last step, so a fast CPU run
  does not flood the store (a Modal Dict write takes milliseconds). No loss is lost:
  each event also carries `losses`, the [step, loss] pairs since the previous one.
- The run record's step/total_steps/metrics are saved every `save_interval_s`.
- The stop flag is looked at every step; when set, training stops after this step and
  a checkpoint is saved, so a stopped run can be resumed. So is the run's budget
  (`trainkit_core.training.budget`): once it is spent, the run stops the same way,
  its `stop_reason` saying which limit was reached.
- None of the three waits for the store during a step: between `train_begin` and
  `close`, events are queued for a background writer (`EventBatcher`), the record is
  saved by a background thread and the stop flag read by another
  (`trainkit_core.training.background`). `close` (on the end of training, and in the
  job's ``finally``) writes everything left.
- After the trainer writes a checkpoint to its scratch folder, it is copied to
  ``trained/<id>/checkpoints/<step>/`` with the tokenizer and `trained_model.json`,
  the `done` marker last, and the models volume is committed.
"""

from __future__ import annotations

import logging
import math
import resource
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainkit_core.models.trained.layout import DONE_FILE, checkpoint_path
from trainkit_core.runs.event_batch import EventBatcher
from trainkit_core.runs.training_run import TrainingRun
from trainkit_core.training.background import RecordSaver, StopWatcher
from trainkit_core.training.budget import RunBudget

log = logging.getLogger(__name__)


def memory_mb() -> float:
    """Peak memory of this process: GPU memory when CUDA is in use, else the peak RSS."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 1024), 1)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class Reporter:
    """What the callback does, independent of transformers."""

    def __init__(
        self,
        run: TrainingRun,
        *,
        models_root: Path,
        save_checkpoint_extras: Callable[[Path, int], None],
        commit: Callable[[], None],
        event_interval_s: float = 0.25,
        save_interval_s: float = 5.0,
        stop_poll_s: float = 0.2,
        flush_interval_s: float = 0.25,
        event_fields: dict[str, str] | None = None,
    ) -> None:
        self.run = run
        #: A method's own log keys (trl's names) and the progress-event fields they become.
        self.event_fields = dict(event_fields or {})
        self.models_root = Path(models_root)
        self.save_checkpoint_extras = save_checkpoint_extras
        self.commit = commit
        self.event_interval_s = event_interval_s
        self.save_interval_s = save_interval_s
        self.stop_requested = False
        self.first_loss: float | None = _number(run.metrics.get("first_loss"))  # kept across a resume
        self.last_loss: float | None = None
        self._start_time = time.monotonic()
        self._start_step = 0
        self._start_tokens = 0
        self._last_event = 0.0
        self._last_save = time.monotonic()
        self._pending: dict[str, Any] | None = None
        self._window: list[list[float]] = []
        self._lock = threading.RLock()  # the run object, between the step and the background saver
        self.stop_watcher = StopWatcher(run.store.stop_flag(run.id), poll_s=stop_poll_s)
        self._flush_interval_s = flush_interval_s
        self._own_batcher: EventBatcher | None = None  # when the job attached none (`JobWrites`)
        self._saver = RecordSaver(self._save_snapshot, interval_s=save_interval_s)
        self.budget = RunBudget.for_run(run)
        self._started = False

    # ----------------------------------------------------------------- background

    def start(self) -> None:
        """Move the store work off the step's path (idempotent)."""
        if not self._started:
            self._started = True
            if self.run.events.batcher is None:
                self._own_batcher = EventBatcher(self.run.events, interval_s=self._flush_interval_s).start()
            self._saver.start()
            self.stop_watcher.start()
            if self.budget is not None:
                self.budget.start()

    def close(self, *, save: bool = True) -> None:
        """Write what is held back and stop the background threads (idempotent; call it on any end).

        `save=False` leaves the record to the caller, who saves it next (the job does, on every way on).
        """
        with self._lock:
            if self._pending is not None:
                self._emit(self._pending)
        if self._started:
            self._started = False
            self.stop_watcher.close()
            if self.budget is not None:
                self.budget.close()
            self._saver.close()
            if self._own_batcher is not None:
                self._own_batcher.close()
                self._own_batcher = None
            if save:
                self._save_snapshot()  # the record as the last step left it

    def _save_snapshot(self) -> None:
        """Save the record as the step left it: queued to the job's `RecordWriter` when one is
        attached, else a copy taken under the lock and written outside it (the step never
        waits for the store, only for the copy)."""
        with self._lock:
            if self.run.writer is not None:
                self.run.save()
                return
            data = self.run.snapshot()
        self.run.write_record(data)

    def _batcher(self) -> EventBatcher | None:
        return self.run.events.batcher  # type: ignore[no-any-return]

    # ----------------------------------------------------------------- events

    def train_begin(self, step: int, total_steps: int, tokens: int = 0) -> None:
        self._start_time = time.monotonic()
        self._start_step = step
        self._start_tokens = tokens
        with self._lock:
            self.run.step = step
            self.run.total_steps = total_steps
        self.start()
        self._saver.request()  # by the background saver: the job just saved the record (phase `training`)

    def log(
        self, step: int, total_steps: int, logs: dict[str, Any], tokens: int = 0, rank_memory: list[float] | None = None
    ) -> None:
        """One trainer log entry (every step). Emits a progress event when due; never waits for the store.

        `rank_memory`: each rank's peak memory in MB, in rank order, in a run on several processes.
        """
        loss = _number(logs.get("loss"))
        if loss is None:
            return  # an end-of-training summary (train_runtime, ...) rather than a step
        if self.first_loss is None:
            self.first_loss = loss
        self.last_loss = loss
        self._window.append([step, loss])
        elapsed = max(1e-9, time.monotonic() - self._start_time)
        done = max(0, step - self._start_step)
        event: dict[str, Any] = {
            "step": step,
            "total_steps": total_steps,
            "loss": loss,
            "learning_rate": _number(logs.get("learning_rate")),
            "grad_norm": _number(logs.get("grad_norm")),
            "epoch": _number(logs.get("epoch")),
            "tokens_per_s": round((tokens - self._start_tokens) / elapsed, 1) if tokens else None,
            "eta_s": round((total_steps - step) * elapsed / done, 1) if done else None,
            "memory_mb": memory_mb(),
        }
        if rank_memory:
            event["memory_mb_ranks"] = rank_memory
        for key, name in self.event_fields.items():
            value = _number(logs.get(key))
            if value is not None:
                event[name] = value
        now = time.monotonic()
        first = self._last_event == 0.0
        if first or step >= total_steps or now - self._last_event >= self.event_interval_s:
            self._emit(event)
        else:
            self._pending = event
        with self._lock:
            self.run.step = step
            self.run.total_steps = total_steps
            self.run.metrics.update({"first_loss": self.first_loss, "loss": loss})
            if event["tokens_per_s"]:
                self.run.metrics["tokens_per_s"] = event["tokens_per_s"]  # what later plans measure by
            if tokens:
                self.run.metrics["tokens_seen"] = tokens  # the tokens trained on (padding left out)
        if now - self._last_save >= self.save_interval_s:
            self._last_save = now
            if self._started:
                self._saver.request()
            else:
                self.run.save()

    def _emit(self, event: dict[str, Any]) -> None:
        self._last_event = time.monotonic()
        self._pending = None
        event["losses"], self._window = self._window, []
        self.run.events.append("progress", **event)  # queued while the batcher is attached

    def flush(self) -> None:
        """Write the last progress event that was held back, and every queued event."""
        if self._pending is not None:
            self._emit(self._pending)
        batcher = self._batcher()
        if self._started and batcher is not None:
            batcher.flush()

    def should_stop(self) -> bool:
        """Whether a stop was requested (every step: answered from memory while started)."""
        if self.stop_requested:
            return True
        reason = self.budget.exceeded() if self.budget is not None else None
        if reason is not None:
            with self._lock:
                self.run.stop_reason = reason
        if reason is not None or (self.stop_watcher.is_set() if self._started else self.stop_watcher.check_now()):
            self.stop_requested = True
            if self._pending is not None:
                self._emit(self._pending)
            self.run.events.append("log", message=f"{reason or 'stop requested'}: stopping after step {self.run.step}")
            batcher = self._batcher()
            if self._started and batcher is not None:
                batcher.flush_soon()  # written now, but not by the step
        return self.stop_requested

    # ----------------------------------------------------------------- checkpoints

    def checkpoint_saved(self, scratch_dir: Path, step: int) -> str:
        """Copy the trainer's checkpoint to the models volume; returns its volume path."""
        from trainkit_core.training.distributed import is_main_rank

        if not is_main_rank():  # rank 0 writes the run's one copy
            shutil.rmtree(scratch_dir, ignore_errors=True)
            return ""
        started = time.time()
        rel = checkpoint_path(self.run.id, step)
        target = self.models_root / rel
        if target.exists():
            shutil.rmtree(target)  # an incomplete one from a killed attempt
        shutil.copytree(scratch_dir, target)
        with self._lock:  # the extras change and save the record (sample generations)
            self.save_checkpoint_extras(target, step)
        if self._started:
            self._saver.request()  # a background save in flight may have carried an older copy
        (target / DONE_FILE).write_text(f"{time.time()}\n")
        self.commit()
        with self._lock:
            self.run.record_substep("training", f"checkpoint-{step:08d}", started, time.time(), step=step, ok=True)
        shutil.rmtree(scratch_dir, ignore_errors=True)
        if self._pending is not None:
            self._emit(self._pending)
        self.run.events.append("checkpoint", step=step, path=rel)
        return rel


def _process_group() -> tuple[Any, str] | None:
    """(torch.distributed, the device its collectives use), or None outside a run on several ranks."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    return dist, "cuda" if dist.get_backend() == "nccl" else "cpu"


def _any_rank(flag: bool) -> bool:
    """`flag` of any rank, on every rank: all ranks stop after the same step.

    Each rank reads the stop flag itself, but they may see it at different steps; a rank
    that stopped alone would leave the others waiting in the next gradient all-reduce.
    Outside a distributed run it is `flag` itself.
    """
    group = _process_group()
    if group is None:
        return flag
    import torch

    dist, device = group
    value = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def _every_rank_memory() -> list[float] | None:
    """Each rank's peak memory (MB), gathered on every rank at the same log; None outside a distributed run.

    Every rank logs at the same steps (the trainer's `logging_steps`), so all of them meet here.
    """
    group = _process_group()
    if group is None:
        return None
    import torch

    dist, device = group
    mine = torch.tensor([memory_mb()], dtype=torch.float64, device=device)
    every = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return [round(float(t.item()), 1) for t in every]


def check_same_start(step: int) -> None:
    """Every rank starts (or resumes) at the same step, or the run fails now.

    A rank that missed the checkpoint would train from step 0 beside ranks at step N: the
    collectives still match up, so the run would end "succeeded" having learnt from the
    wrong examples. Outside a distributed run there is nothing to compare.
    """
    group = _process_group()
    if group is None:
        return
    import torch

    from trainkit_core.errors import JobError

    dist, device = group
    low, high = torch.tensor([step], device=device), torch.tensor([step], device=device)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    if low.item() != high.item():
        raise JobError(
            f"the ranks start at different steps ({low.item()} to {high.item()}): a rank missed the checkpoint"
        )


def make_callback(reporter: Reporter) -> Any:
    """A `TrainerCallback` driving `reporter`."""
    from transformers import TrainerCallback

    class TrainkitCallback(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            check_same_start(state.global_step)
            reporter.train_begin(state.global_step, state.max_steps, getattr(state, "num_input_tokens_seen", 0) or 0)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            tokens = getattr(state, "num_input_tokens_seen", 0) or 0
            reporter.log(state.global_step, state.max_steps, logs or {}, tokens, rank_memory=_every_rank_memory())

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if _any_rank(reporter.should_stop()):
                reporter.stop_requested = True  # another rank saw the flag first: this run stopped too
                control.should_training_stop = True
                control.should_save = True
            return control

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            scratch = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if scratch.is_dir():
                reporter.checkpoint_saved(scratch, state.global_step)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            reporter.close()

    return TrainkitCallback()
