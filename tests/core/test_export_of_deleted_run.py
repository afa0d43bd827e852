"""An export job whose model is deleted while it merges renames nothing into place.

`runs delete` removes a model and its exports; an export job that was merging then must not
bring the deleted run's weights back under ``exports/``. The job reloads the models volume
before its rename (the moment another process's delete becomes visible to it); here the
delete lands in the first reload after the merge wrote its partial export.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from trainkit_core.errors import JobError

pytestmark = pytest.mark.ml


@pytest.fixture
def trained(trainkit_home: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from trainkit_core import get_provider
    from trainkit_core.training.submit import start_run

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    provider = get_provider("local")
    run = start_run(provider, {"dataset": "demo", "steps": 2, "save_every": 1000}).wait(timeout=600)
    assert run.status == "succeeded", run.error_message
    return provider, run


def test_a_model_deleted_during_its_export_leaves_no_export(trained: Any) -> None:
    from trainkit_core.export.job import export
    from trainkit_core.export.merged import EXPORT_PARTIAL_PREFIX
    from trainkit_core.local.plugin import job_context
    from trainkit_core.models.trained.paths import trained_dir

    provider, run = trained
    ctx = job_context(provider.settings, "test-export")
    models = ctx.path("models")

    def reload_after_a_delete(kind: str) -> None:
        merged = list((models / "exports").glob(f"{EXPORT_PARTIAL_PREFIX}*"))
        if kind == "models" and merged and (models / trained_dir(run.id)).exists():
            shutil.rmtree(models / trained_dir(run.id))  # what `runs delete` did while the job merged

    ctx = dataclasses.replace(ctx, reload=reload_after_a_delete)
    with pytest.raises(JobError, match="was deleted while it was being exported; nothing was written"):
        export(ctx, f"trained/{run.id}")
    exports = models / "exports"
    assert not exports.exists() or list(exports.iterdir()) == []  # neither the export nor its partial folder


def test_the_same_export_without_a_delete_is_written(trained: Any) -> None:
    from trainkit_core.export.job import export
    from trainkit_core.local.plugin import job_context

    provider, run = trained
    ctx = job_context(provider.settings, "test-export")
    result = export(ctx, f"trained/{run.id}")
    assert (ctx.path("models") / result["export_path"] / "model.safetensors").is_file()
