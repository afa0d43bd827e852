"""Where a run's own files live on the models volume, beside its trained model.

The history (`record.json`, `events.jsonl`, written when the run ends) outlives the
key-value record; the dashboard components the run attached sit in the same folder,
so deleting the run's history deletes them too.
"""

from __future__ import annotations


def history_dir(run_id: str) -> str:
    return f"runs/{run_id}"


def components_dir(run_id: str) -> str:
    return f"{history_dir(run_id)}/components"
