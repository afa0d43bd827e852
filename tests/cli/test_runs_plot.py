"""`trainkit runs plot`: the plotted curve is the run's loss events, in a PNG or a sparkline.

Runs are written into the local provider's real store (SQLite and the models volume)
the way the training callback writes them; the command runs as a subprocess, as a
user runs it. Torch-free.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trainkit_cli.plot import SPARK_BLOCKS, loss_series, sparkline
from trainkit_core import get_provider
from trainkit_core.ids import new_run_id
from trainkit_core.runs.training_run import RunStore, TrainingRun


def trainkit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainkit_cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def store() -> RunStore:
    return RunStore.for_provider(get_provider("local"))


def make_run(losses: dict[int, float], *, resumed_from: int | None = None) -> TrainingRun:
    """A finished run whose progress events report `losses` (step -> loss), with other events between."""
    run = TrainingRun(id=new_run_id(), provider="local", status="succeeded", created_at=time.time())
    run.attach(store()).save()
    log = run.events
    log.append("phase", phase="training")
    for step, loss in losses.items():
        log.append("progress", step=step, loss=loss, learning_rate=1e-2, tokens_per_s=5000.0)
        if step % 10 == 0:
            log.append("checkpoint", step=step, path=f"trained/{run.id}/checkpoints/{step:08d}")
    log.append("progress", step=max(losses), loss=None, eta_s=0)  # an event without a loss is no point
    if resumed_from is not None:  # a resume repeats the steps after its checkpoint; the new values win
        for step in range(resumed_from + 1, max(losses) + 1):
            log.append("progress", step=step, loss=losses[step] / 2)
    log.append("status", status="succeeded")
    return run


def expected_points(run: TrainingRun) -> tuple[list[int], list[float]]:
    """What the plot must show, computed here from the stored events (not by the plot code)."""
    latest: dict[int, float] = {}
    for event in run.events.read():
        if event["type"] == "progress" and event.get("loss") is not None:
            latest[event["step"]] = event["loss"]
    steps = sorted(latest)
    return steps, [latest[s] for s in steps]


FALLING = {step: 7.0 * 0.97**step + 0.3 for step in range(1, 61)}


def test_sparkline_maps_values_to_blocks() -> None:
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == SPARK_BLOCKS
    assert sparkline([8, 1]) == "█▁"
    assert sparkline([3.0, 3.0, 3.0]) == "▁▁▁"
    assert sparkline([]) == ""
    # 100 values into 10 buckets of averaged values, still rising
    line = sparkline([float(i) for i in range(100)], width=10)
    assert len(line) == 10 and line[0] == "▁" and line[-1] == "█" and list(line) == sorted(line)
    # a shared scale keeps heights comparable across runs
    assert sparkline([1.0, 2.0], scale=(0.0, 8.0)) == "▂▃"


def test_loss_series_keeps_latest_value_per_step() -> None:
    events: list[dict[str, Any]] = [
        {"type": "progress", "step": 2, "loss": 4.0},
        {"type": "progress", "step": 1, "loss": 5.0},
        {"type": "log", "message": "resumed"},
        {"type": "progress", "step": 2, "loss": 3.5},
        {"type": "progress", "step": 3, "loss": None},
        {"type": "progress", "step": 4, "loss": float("nan")},
    ]
    series = loss_series("run-x", events)
    assert (series.steps, series.losses) == ([1, 2], [5.0, 3.5])


def require_matplotlib() -> None:
    """Skip without matplotlib (the [plot] extra), unless TRAINKIT_REQUIRE_PLOT=1 (the browser nox session)."""
    if importlib.util.find_spec("matplotlib") is None:
        if os.environ.get("TRAINKIT_REQUIRE_PLOT") == "1":
            pytest.fail("matplotlib is not installed (TRAINKIT_REQUIRE_PLOT=1)")
        pytest.skip("matplotlib is not installed (pip install 'trainkit-cli[plot]')")


@pytest.mark.slow
def test_png_curve_matches_events(cli_env: dict[str, str], tmp_path: Path) -> None:
    require_matplotlib()
    import matplotlib.image

    from trainkit_cli.plot import write_loss_png

    first = make_run(FALLING)
    second = make_run({step: loss + 1.0 for step, loss in FALLING.items()}, resumed_from=40)
    out = tmp_path / "loss.png"

    done = trainkit(cli_env, "runs", "plot", first.id, second.id, "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    reported = {r["run_id"]: (r["steps"], r["losses"]) for r in json.loads(done.stdout)["runs"]}
    assert reported == {first.id: expected_points(first), second.id: expected_points(second)}
    assert reported[second.id][1][-1] == pytest.approx((FALLING[60] + 1.0) / 2)  # the resumed value won

    # The PNG is a real image of the expected size, with no partial file left behind.
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["loss.png"]
    pixels = matplotlib.image.imread(out)
    assert pixels.shape[:2] == (450, 800)

    # What the figure drew is exactly the events' points (read back from the plotted lines).
    single = tmp_path / "one.png"
    drawn = write_loss_png([loss_series(first.id, first.events.read())], single)
    assert drawn == {first.id: tuple(list(map(float, v)) for v in expected_points(first))}

    # And the picture falls like the loss: the line's pixels (matplotlib's first colour,
    # #1f77b4) sit higher in the image on the left than on the right.
    image = matplotlib.image.imread(single)[:, :, :3]
    blue = (
        (abs(image[:, :, 0] - 0x1F / 255) < 0.08)
        & (abs(image[:, :, 1] - 0x77 / 255) < 0.08)
        & (abs(image[:, :, 2] - 0xB4 / 255) < 0.08)
    )
    rows, cols = blue.nonzero()
    assert len(cols) > 200
    left = rows[cols < cols.min() + (cols.max() - cols.min()) * 0.2].mean()
    right = rows[cols > cols.max() - (cols.max() - cols.min()) * 0.2].mean()
    assert left < right - 100  # image rows grow downwards


@pytest.mark.slow
def test_sparkline_without_out(cli_env: dict[str, str]) -> None:
    run = make_run(FALLING)
    done = trainkit(cli_env, "runs", "plot", run.id, "--width", "30")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith(run.id))
    spark = line.split()[1]
    assert len(spark) == 30 and set(spark) <= set(SPARK_BLOCKS)
    assert spark[0] == "█" and spark[-1] == "▁"
    assert f"{FALLING[1]:.4g} → {FALLING[60]:.4g}" in line


@pytest.mark.slow
def test_plot_reads_history_when_the_store_forgot_the_events(cli_env: dict[str, str]) -> None:
    run = make_run(FALLING)
    expected = expected_points(run)
    run.write_history()
    run.events.delete()  # as when key-value entries expire
    done = trainkit(cli_env, "runs", "plot", run.id, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == [{"run_id": run.id, "steps": expected[0], "losses": expected[1]}]


@pytest.mark.slow
def test_errors_name_the_problem_and_write_nothing(cli_env: dict[str, str], tmp_path: Path) -> None:
    missing = new_run_id()
    done = trainkit(cli_env, "runs", "plot", missing)
    assert done.returncode == 3 and f"no run {missing!r}" in done.stderr

    done = trainkit(cli_env, "runs", "plot", "not-a-run-id")
    assert done.returncode == 2 and "not-a-run-id" in done.stderr

    run = make_run(FALLING)
    done = trainkit(cli_env, "runs", "plot", run.id, "--out", str(tmp_path / "nowhere" / "loss.png"))
    assert done.returncode == 2 and "does not exist" in done.stderr
    assert not (tmp_path / "nowhere").exists()

    empty = TrainingRun(id=new_run_id(), provider="local", status="running", created_at=time.time())
    empty.attach(store()).save()
    done = trainkit(cli_env, "runs", "plot", empty.id)
    assert done.returncode == 0 and "no loss reported yet" in done.stdout
    if importlib.util.find_spec("matplotlib") is not None:
        done = trainkit(cli_env, "runs", "plot", empty.id, "--out", str(tmp_path / "empty.png"))
        assert done.returncode == 2 and "nothing to plot" in done.stderr
        assert not (tmp_path / "empty.png").exists()
