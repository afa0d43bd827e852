"""The ``infer`` job: one generation in a fresh process, for providers without warm inference.

Loads the model (validated again here: a job never trusts its caller), generates, and
returns the result dict. Warm servers use the same loading and generation code.
"""

from __future__ import annotations

import os
from typing import Any

from trainkit_core.plugins.job_context import JobContext


def infer(ctx: JobContext, **request: Any) -> dict[str, Any]:
    from trainkit_core.inference.generation import generate
    from trainkit_core.inference.loading import ModelCache
    from trainkit_core.inference.request import GenerateRequest
    from trainkit_core.models.trained import default_model_for_preset
    from trainkit_core.toolkit.folder_volume import FolderVolume

    os.environ["HF_HOME"] = str(ctx.path("hf-cache"))  # base models live on the hf-cache volume
    req = GenerateRequest.parse(request)
    if req.model_path is None:
        ref = default_model_for_preset(FolderVolume(ctx.path("models")), req.model_size or "")
        req = req.model_copy(update={"model_path": ref.path, "model_size": None})
    cache = ModelCache(ctx.path("models"), ctx.path("hf-cache"))
    return generate(cache.get(req.model_path or ""), req)
