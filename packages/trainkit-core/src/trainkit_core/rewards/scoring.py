"""Calling graders so that a broken one fails the run instead of teaching the model nothing.

Calls run on a daemon thread (one per grader and step), each with a time limit: a grader that raises, returns
something that is not a finite number, or runs past `timeout_s` raises `GraderError`
naming the grader and the example (its first prompt words and line fields), never a
zero reward. A hung grader's thread cannot be killed from Python; being a daemon, it
does not keep the job's process alive once the run has failed. A grader that holds the
GIL would stop the timer too: the built-in `regex` grader matches with an engine that
releases the GIL and bounds each match by the same timeout (`builtin.match_time_limit`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from trainkit_core.errors import JobError
from trainkit_core.rewards.builtin import Grader, match_time_limit


class GraderError(JobError):
    """A grader failed: raised, returned a non-finite number, or ran past its time limit."""


def describe_example(example: Mapping[str, Any]) -> str:
    messages = example.get("messages") or []
    users = [m.get("content", "") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    prompt = str(users[-1] if users else "")
    shown = prompt if len(prompt) <= 80 else prompt[:80] + "…"
    where = example.get("_where")
    prefix = f"{where} " if where else ""
    return f"{prefix}(prompt {shown!r})"


def call_grader(name: str, grader: Grader, completion: str, example: Mapping[str, Any], timeout_s: float) -> float:
    """`grader(completion, example)` as a float, or `GraderError` (see the module docstring)."""
    return call_grader_batch(name, grader, [(completion, example)], timeout_s)[0]


def call_grader_batch(
    name: str, grader: Grader, calls: Sequence[tuple[str, Mapping[str, Any]]], timeout_s: float
) -> list[float]:
    """One grader over a step's completions, in order, on one thread for the whole batch.

    A thread per call cost about 2 % of a GRPO step in a profile; one per batch keeps the
    per-call time limit (each call's clock starts when the one before it ended) and names
    the example that failed, as a single call does.
    """
    outcomes: list[dict[str, Any]] = [{} for _ in calls]
    finished = [threading.Event() for _ in calls]

    def target() -> None:
        match_time_limit(timeout_s)  # a built-in match gives up by itself (`builtin.regex`)
        for (completion, example), outcome, done in zip(calls, outcomes, finished, strict=True):
            try:
                outcome["value"] = grader(completion, example)
            except BaseException as exc:  # reported below, with the grader's name
                outcome["error"] = exc
                done.set()
                return
            done.set()

    thread = threading.Thread(target=target, name=f"grader-{name}", daemon=True)
    thread.start()
    scores = []
    for (_, example), outcome, done in zip(calls, outcomes, finished, strict=True):
        if not done.wait(timeout_s):
            raise GraderError(
                f"grader {name!r} ran past its timeout of {timeout_s:g} s on example {describe_example(example)}"
            )
        scores.append(_checked_score(name, outcome, example))
    return scores


def call_grader_process_batch(
    name: str, process: Any, calls: Sequence[tuple[str, Mapping[str, Any]]], timeout_s: float
) -> list[float]:
    """`call_grader_batch` for a plugin grader in its own process (`rewards.process.GraderProcess`):
    a call past `timeout_s` has its process killed, so the limit bounds the grader's work too."""
    scores = []
    for (_, example), outcome in zip(calls, process.outcomes(calls, timeout_s), strict=False):
        if outcome.get("timeout"):
            raise GraderError(
                f"grader {name!r} ran past its timeout of {timeout_s:g} s on example {describe_example(example)}"
            )
        scores.append(_checked_score(name, outcome, example))
    return scores


def _checked_score(name: str, outcome: Mapping[str, Any], example: Mapping[str, Any]) -> float:
    # The example is described only when the call failed: this runs for every completion of every step.
    if "error" in outcome:
        exc = outcome["error"]
        raise GraderError(
            f"grader {name!r} raised {type(exc).__name__}: {exc} on example {describe_example(example)}"
        ) from exc
    value = outcome.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraderError(
            f"grader {name!r} returned {type(value).__name__} {value!r}, not a number, "
            f"on example {describe_example(example)}"
        )
    if not math.isfinite(value):
        raise GraderError(
            f"grader {name!r} returned {value!r}, not a finite number, on example {describe_example(example)}"
        )
    return float(value)
