"""Budgets: a run, or a sweep's group of runs, stops itself gracefully once it has cost or lasted enough.

A budget is stored on the run record (`TrainingRun.budget`) when it is started:

- ``max_cost_usd`` / ``max_duration_s``: this run's cost (`TrainingRun.cost_at`) and
  job time (`TrainingRun.job_seconds`, every attempt);
- ``group_max_cost_usd`` / ``group_max_duration_s``: a sweep's, over the whole group
  (its other runs' figures as last written, plus this run's own, live).

The training callback (`trainkit_core.training.progress.Reporter`) asks
`RunBudget.exceeded` after every step; it answers from memory: the run's own figures
are arithmetic on the clock, and the group's other runs are read by a background
thread every `group_poll_s` (a step never waits for the store). A budget that runs out
takes the graceful-stop path a user's stop takes: training stops after the step, the
adapter and a checkpoint are saved, the run ends `stopped` with the reason in
`stop_reason`. `clock` is the wall clock the budget reads; tests put a test clock in
its place. No heavy imports.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.runs.training_run import TrainingRun
from trainkit_core.toolkit.background import BackgroundWorker

log = logging.getLogger(__name__)

#: The wall clock budgets read (a test replaces it).
clock: Callable[[], float] = time.time

LIMITS = ("max_cost_usd", "max_duration_s", "group_max_cost_usd", "group_max_duration_s")


def check_budget(budget: dict[str, Any] | None, price: dict[str, Any]) -> dict[str, float]:
    """The budget's limits, checked (positive, finite numbers); `UsageError` naming the bad one.

    A cost limit needs a price: a run whose GPU has none could never reach it.
    """
    checked: dict[str, float] = {}
    for key, value in (budget or {}).items():
        if value is None:
            continue
        if key not in LIMITS:
            raise UsageError(f"unknown budget limit {key!r}; known: {', '.join(LIMITS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise UsageError(f"budget {key} must be a positive number, not {value!r}")
        checked[key] = float(value)
    if any(k.endswith("cost_usd") for k in checked) and price.get("usd_per_hour") is None:
        raise UsageError(
            f"no price for GPU {price.get('gpu') or '?'} on provider {price.get('provider') or '?'}: "
            "a cost limit cannot be enforced",
            hint="price it in a TOML table named by TRAINKIT_PRICES_FILE, or give --max-duration instead",
        )
    return checked


def describe(key: str, limit: float) -> str:
    what = {
        "max_cost_usd": f"max cost ${limit:g}",
        "max_duration_s": f"max duration {limit:g} s",
        "group_max_cost_usd": f"the sweep's max cost ${limit:g}",
        "group_max_duration_s": f"the sweep's max duration {limit:g} s",
    }[key]
    return f"budget reached: {what}"


class RunBudget(BackgroundWorker):
    """One run's budget, checked after every step from memory (`exceeded`)."""

    def __init__(self, run: TrainingRun, limits: dict[str, float], *, group_poll_s: float = 5.0) -> None:
        super().__init__("trainkit-budget")
        self.run = run
        self.limits = limits
        self.group_poll_s = group_poll_s
        self.group_id = run.group_id if any(k.startswith("group_") for k in limits) else None
        #: The group's other runs, as last read: (cost in US dollars, job seconds).
        self._others = (0.0, 0.0)

    @classmethod
    def for_run(cls, run: TrainingRun, **kwargs: Any) -> RunBudget | None:
        """The run's budget, or None when it has none."""
        limits = {k: float(v) for k, v in (run.budget or {}).items() if k in LIMITS and v}
        return cls(run, limits, **kwargs) if limits else None

    def start(self) -> RunBudget:
        """Read the group's other runs now, then in the background (when the budget is a group's)."""
        if self.group_id is not None:
            self.read_group()
            super().start()
        return self

    def read_group(self) -> None:
        """The other runs of the group: what they have cost and run, as their records say."""
        now = clock()
        cost = seconds = 0.0
        for other in self.run.store.list(group_id=self.group_id):
            if other.id == self.run.id:
                continue
            cost += other.cost_at(now) or 0.0
            seconds += other.job_seconds(now) or 0.0
        self._others = (cost, seconds)

    def _run(self) -> None:
        while not self._closed.wait(self.group_poll_s):
            try:
                self.read_group()
            except Exception as exc:  # the store cannot answer now: the last figures stand
                log.warning("could not read the sweep group's runs for its budget: %s", exc)

    def spent(self) -> dict[str, float]:
        """The figures each limit is held against, now."""
        now = clock()
        cost, seconds = self.run.cost_at(now) or 0.0, self.run.job_seconds(now) or 0.0
        others_cost, others_seconds = self._others
        return {
            "max_cost_usd": cost,
            "max_duration_s": seconds,
            "group_max_cost_usd": cost + others_cost,
            "group_max_duration_s": seconds + others_seconds,
        }

    def exceeded(self) -> str | None:
        """The reason to stop, once a limit is reached; None while within the budget."""
        spent = self.spent()
        for key, limit in self.limits.items():
            if spent[key] >= limit:
                return describe(key, limit)
        return None


def group_over_budget(runs: list[TrainingRun], limits: dict[str, float]) -> str | None:
    """Whether a sweep's group has already spent its budget (so no further run starts)."""
    now = clock()
    cost = sum(r.cost_at(now) or 0.0 for r in runs)
    seconds = sum(r.job_seconds(now) or 0.0 for r in runs)
    for key, spent in (("group_max_cost_usd", cost), ("group_max_duration_s", seconds)):
        if key in limits and spent >= limits[key]:
            return describe(key, limits[key])
    return None
