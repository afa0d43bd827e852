"""The base-vs-tuned table of an eval report, shared by `trainkit eval` and `trainkit demo`."""

from __future__ import annotations

from typing import Any

from trainkit_cli.state import console

METRICS = (
    ("mean_loss", "mean loss"),
    ("perplexity", "perplexity"),
    ("exact_match", "exact match"),
    ("f1", "token F1"),
    ("end_of_turn_rate", "stopped at end of turn"),
    ("tool_call_accuracy", "tool calls right"),
)


def _cell(metrics: dict[str, Any], key: str) -> str:
    value = metrics.get(key)
    return "" if value is None else f"{value:.4g}"


def print_report(report: dict[str, Any], title: str | None = None) -> None:
    """The base-vs-tuned table."""
    from rich.table import Table

    source = report.get("eval_set") or f"{report.get('dataset')} (eval split)"
    # The title goes on its own line: as a table title it would wrap at the table's width.
    heading = title or f"eval {report.get('report_id', '')}: {report['model_path']} on {source}"
    table = Table()
    table.add_column("metric")
    table.add_column("base", justify="right")
    table.add_column("tuned", justify="right")
    tuned, base = report.get("tuned") or {}, report.get("base") or {}
    for key, label in METRICS:
        if key == "tool_call_accuracy" and key not in base and key not in tuned:
            continue  # only where the examples call tools
        table.add_row(label, _cell(base, key), _cell(tuned, key))
    table.add_row("examples", str(base.get("examples", "")), str(tuned.get("examples", "")))
    out = console()
    out.print(heading, markup=False)
    out.print(table)
