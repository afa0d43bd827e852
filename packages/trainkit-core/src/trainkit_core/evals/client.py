"""The entry the CLI and the API call to run an eval and read reports. No heavy imports.

The model path and the eval set are checked here, before the ``eval`` job starts;
the job checks them again and stores the report on the eval volume.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.evals import sets
from trainkit_core.ids import check_name
from trainkit_core.models.trained import check_model_path, read_card
from trainkit_core.toolkit.kv_lock import LOCKS_NAMESPACE

JOB_TIMEOUT_S = 3600.0


def add_examples(provider: Any, name: str, examples: Iterable[Any], *, replace: bool = False) -> dict[str, Any]:
    return sets.add_examples(
        provider.volume("eval"), name, examples, replace=replace, lock_kv=provider.kv(LOCKS_NAMESPACE)
    )


def eval_request(
    provider: Any,
    *,
    model_path: str,
    eval_set: str | None = None,
    dataset: str | None = None,
    max_examples: int | None = None,
    max_new_tokens: int = 64,
    compare_base: bool = True,
) -> dict[str, Any]:
    """The checked arguments of the eval job. Without a set or a dataset: the model's dataset's eval split."""
    models = provider.volume("models")
    ref = check_model_path(model_path, models)
    if eval_set is not None and dataset is not None:
        raise UsageError("give an eval set or a dataset, not both")
    if eval_set is not None:
        sets.read_set(provider.volume("eval"), eval_set)  # exists and parses
    else:
        dataset = dataset or read_card(models, ref).dataset_id
        if not dataset:
            raise UsageError(f"{ref.path} records no dataset; give --set or --dataset")
        check_name(dataset.lower(), what="dataset name")
    if max_examples is not None and max_examples < 1:
        raise UsageError("max_examples must be at least 1")
    if not 1 <= max_new_tokens <= 4096:
        raise UsageError("max_new_tokens must be between 1 and 4096")
    return {
        "model_path": ref.path,
        "eval_set": eval_set,
        "dataset": dataset if eval_set is None else None,
        "max_examples": max_examples,
        "max_new_tokens": max_new_tokens,
        "compare_base": compare_base,
        "report_id": sets.new_report_id(),
    }


def run_eval(provider: Any, *, timeout: float = JOB_TIMEOUT_S, **kwargs: Any) -> dict[str, Any]:
    """Run the eval job and wait; the stored report (metrics of tuned and base)."""
    request = eval_request(provider, **kwargs)
    provider.deployment().check(["eval"])
    return dict(provider.spawn("eval", **request).wait(timeout=timeout))


def start_eval(provider: Any, **kwargs: Any) -> tuple[str, Any]:
    """Start the eval job without waiting: (report id, run handle)."""
    request = eval_request(provider, **kwargs)
    provider.deployment().check(["eval"])
    return request["report_id"], provider.spawn("eval", **request)


def get_report(provider: Any, report_id: str, *, examples: bool = False) -> dict[str, Any]:
    return sets.read_report(provider.volume("eval"), report_id, examples=examples)
