"""Loss curves of runs: read from their event logs, drawn as a PNG or a text sparkline.

The series come from the runs' `progress` events (step, loss), the same events the
dashboard draws, so a plot shows exactly what the run reported. matplotlib is
imported only inside `write_loss_png` (the `trainkit-cli[plot]` extra): `trainkit
--help` and the sparkline need nothing beyond the CLI's own dependencies.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit_core.errors import MissingExtraError, UsageError
from trainkit_core.runs.training_run import RunStore, history_dir

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


@dataclass
class LossSeries:
    """One run's loss curve: steps and losses, in step order."""

    run_id: str
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.steps)


def loss_series(run_id: str, events: Iterable[Mapping[str, Any]]) -> LossSeries:
    """The (step, loss) points of a run's progress events.

    A resumed run reports again the steps after its checkpoint; the latest value of a
    step wins, as it is the one the final model continued from.
    """
    by_step: dict[int, float] = {}
    for event in events:
        if event.get("type") != "progress":
            continue
        step, loss = event.get("step"), event.get("loss")
        if step is None or loss is None:
            continue
        value = float(loss)
        if math.isfinite(value):
            by_step[int(step)] = value
    steps = sorted(by_step)
    return LossSeries(run_id, steps, [by_step[s] for s in steps])


def read_run_events(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """A run's events from the key-value store, else from its history on the models volume.

    Raises `NotFoundError` when no such run exists.
    """
    run = store.get(run_id)  # NotFoundError names the run
    events = run.events.read()
    if events:
        return events
    path = f"{history_dir(run_id)}/events.jsonl"
    if store.models.exists(path):
        text = store.models.read_bytes(path).decode()
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return []


def sparkline(values: Sequence[float], width: int = 60, *, scale: tuple[float, float] | None = None) -> str:
    """`values` as block characters, averaged into at most `width` buckets (low = ▁, high = █).

    `scale` (low, high) puts several lines on one scale, so their heights compare.
    """
    if not values:
        return ""
    width = max(1, width)
    if len(values) > width:
        buckets: list[float] = []
        for i in range(width):
            lo, hi = i * len(values) // width, (i + 1) * len(values) // width
            chunk = values[lo:hi]
            buckets.append(sum(chunk) / len(chunk))
        values = buckets
    low, high = scale if scale is not None else (min(values), max(values))
    span = high - low
    top = len(SPARK_BLOCKS) - 1
    return "".join(SPARK_BLOCKS[0 if span <= 0 else min(top, max(0, round((v - low) / span * top)))] for v in values)


def write_loss_png(
    series: Sequence[LossSeries], out: Path, *, title: str | None = None
) -> dict[str, tuple[list[float], list[float]]]:
    """Draw the loss curves (overlaid) into the PNG `out`.

    Returns what was drawn, read back from the plotted lines: run id -> (x, y). A run
    without loss points is left out of the figure (the caller says so).
    """
    drawn = [s for s in series if len(s)]
    if not drawn:
        raise UsageError("none of the runs has reported a loss yet: nothing to plot")
    out = Path(out)
    if out.suffix.lower() != ".png":
        raise UsageError(f"--out must name a .png file, not {str(out)!r}")
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {str(out)!r}: directory {str(out.parent)!r} does not exist")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingExtraError(
            "writing a PNG needs matplotlib",
            hint="pip install 'trainkit-cli[plot]', or leave out --out for a sparkline",
        ) from None

    figure = Figure(figsize=(8, 4.5), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself to the figure: a canvas without pyplot's global state
    axes = figure.add_subplot()
    for s in drawn:
        axes.plot(s.steps, s.losses, linewidth=1.6, label=s.run_id)
    axes.set_xlabel("step")
    axes.set_ylabel("training loss")
    axes.set_title(title or ("Training loss" if len(drawn) > 1 else f"Training loss of {drawn[0].run_id}"))
    axes.grid(True, alpha=0.3)
    if len(drawn) > 1:
        axes.legend(fontsize="small")
    # Write next to the target and rename, so a failed write leaves no half-written PNG.
    partial = out.with_name(f".{out.name}.partial")
    try:
        figure.savefig(partial, format="png")
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    drawn_data: dict[str, tuple[list[float], list[float]]] = {}
    for line in axes.get_lines():
        xs: Any = line.get_xdata()
        ys: Any = line.get_ydata()
        drawn_data[str(line.get_label())] = ([float(x) for x in xs], [float(y) for y in ys])
    return drawn_data
