"""`GET /v1/models`: the trained models, in OpenAI's list shape (so OpenAI clients list them).

Each entry's `id` is what `/v1/chat/completions` takes as `model`: the model path
``trained/<run id>``. The trainkit fields (base model, preset, dataset, metrics, size,
checkpoints) ride along; OpenAI clients ignore what they do not know.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.state import ApiState, get_state


class ModelCard(BaseModel):
    id: str = Field(description="The model path, `trained/<run id>`: the `model` of a chat completion.")
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "trainkit"
    run_id: str
    base_model: str
    preset: str
    chat_format: str
    dataset_id: str
    size_bytes: int
    metrics: dict[str, Any] = Field(default_factory=dict)
    checkpoints: list[int] = Field(default_factory=list, description="Steps of its complete checkpoints.")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


router = APIRouter(prefix="/v1", tags=["models"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)


@router.get("/models", response_model=ModelList)
def list_models(state: ApiState = Depends(get_state)) -> ModelList:
    """Trained models on the models volume, newest first."""
    from trainkit_core.models.trained import list_trained_models

    cards = [
        ModelCard(
            id=m.model_path,
            created=int(m.created_at),
            run_id=m.run_id,
            base_model=m.base_model,
            preset=m.preset,
            chat_format=m.chat_format,
            dataset_id=m.dataset_id,
            size_bytes=m.size_bytes,
            metrics=m.metrics,
            checkpoints=m.checkpoints,
        )
        for m in list_trained_models(state.provider.volume("models"))
    ]
    return ModelList(data=cards)


def build_router() -> APIRouter:
    return router
