"""The ``eval`` job: score a trained model and its base on eval examples, store the report.

Examples come from an eval set on the eval volume, or from a dataset's eval split on
the data volume. The report (metrics of tuned and base side by side) and every
example with both answers go to ``reports/<report id>/`` on the eval volume.
"""

from __future__ import annotations

import os
import time
from typing import Any

from trainkit_core.plugins.job_context import JobContext


def evaluate(
    ctx: JobContext,
    model_path: str,
    eval_set: str | None = None,
    dataset: str | None = None,
    max_examples: int | None = None,
    max_new_tokens: int = 64,
    compare_base: bool = True,
    report_id: str | None = None,
) -> dict[str, Any]:
    from trainkit_core.errors import UsageError
    from trainkit_core.evals import sets
    from trainkit_core.evals.scoring import evaluate as run
    from trainkit_core.inference.loading import ModelCache
    from trainkit_core.toolkit.folder_volume import FolderVolume

    os.environ["HF_HOME"] = str(ctx.path("hf-cache"))  # base models live on the hf-cache volume
    report_id = sets.check_report_id(report_id) if report_id else sets.new_report_id()
    preference: dict[str, float] = {}
    eval_volume = FolderVolume(ctx.path("eval"))
    cache = ModelCache(ctx.path("models"), ctx.path("hf-cache"))
    loaded = cache.get(model_path)  # validated before anything is read
    if eval_set is not None:
        examples = sets.read_set(eval_volume, eval_set)
        source = {"eval_set": eval_set}
    elif dataset is not None:
        from trainkit_core.datasets.reader import read_synced

        synced = read_synced(ctx.path("data"), dataset)
        if not synced.eval:
            raise UsageError(f"dataset {dataset!r} has no eval split; give an eval set")
        pairs = [e for e in synced.eval if "chosen" in e][:max_examples]
        if pairs:  # preference data: the preferred answer is the reference, and pairs are scored too
            from trainkit_core.evals.preference import preference_accuracy, with_answer

            preference = preference_accuracy(
                loaded.model, loaded.tokenizer, loaded.fmt, pairs, device=loaded.device, adapter=loaded.adapter
            )
        conversations = (
            [{"messages": with_answer(e, "chosen"), **({"tools": e["tools"]} if e.get("tools") else {})} for e in pairs]
            if pairs
            else synced.eval
        )
        examples = [
            sets.normalize_example(e, where=f"{dataset} eval example {i + 1}") for i, e in enumerate(conversations)
        ]
        source = {"dataset": dataset, "dataset_hash": synced.hash}
    else:
        raise UsageError("give an eval set or a dataset")
    if max_examples:
        examples = examples[:max_examples]
    result = run(
        loaded.model,
        loaded.tokenizer,
        loaded.fmt,
        examples,
        device=loaded.device,
        adapter=loaded.adapter,
        compare_base=compare_base,
        max_new_tokens=max_new_tokens,
        processor=loaded.processor,
    )
    report = {
        "report_id": report_id,
        "model_path": loaded.ref.path,
        "run_id": loaded.ref.run_id,
        "base_model": loaded.card.base_model,
        **source,
        "created_at": time.time(),
        "example_count": len(examples),
        "tuned": result["tuned"],
        "base": result["base"],
        **({"preference_accuracy": preference} if preference else {}),
        "eval_s": result["eval_s"],
    }
    from trainkit_core.datasets.images import with_thumbnails

    # The rows' pictures travel with the report (small data URLs): the dashboard shows them beside the answers.
    sets.write_report(eval_volume, report, [with_thumbnails(row) for row in result["rows"]])
    ctx.commit("eval")
    return report
