"""`GET /v1/models`: the trained models, in OpenAI's list shape (so OpenAI clients list them).

Each entry's `id` is what `/v1/chat/completions` takes as `model`: the model path
``trained/<run id>``. The trainkit fields (base model, preset, dataset, metrics, size,
checkpoints) ride along; OpenAI clients ignore what they do not know. A model that a
fine-tuning job made also carries the job's `fine_tuned_model` name, and
`GET /v1/models/{model}` finds it by either name (`client.models.retrieve`).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field
from starlette.convertors import PathConvertor, register_url_convertor

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
    fine_tuned_model: str | None = Field(None, description="The `ft:` name, when a fine-tuning job made it.")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ModelNameConvertor(PathConvertor):
    """A model name in a path: `trained/<run id>` holds slashes, but it is never empty.

    So `/v1/models/` is no route (a 404 before auth, as every unknown path), not a model named "".
    """

    regex = "[^/].*"


register_url_convertor("model_name", ModelNameConvertor())

router = APIRouter(prefix="/v1", tags=["models"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)


def _cards(state: ApiState) -> list[ModelCard]:
    from trainkit_api.fine_tuning.jobs import NAMESPACE
    from trainkit_core.models.trained import list_trained_models
    from trainkit_core.toolkit.kv_values import get_many

    models = list_trained_models(state.provider.volume("models"))
    jobs = get_many(state.kv(NAMESPACE), [m.run_id for m in models])
    return [
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
            fine_tuned_model=(jobs.get(m.run_id) or {}).get("fine_tuned_model"),
        )
        for m in models
    ]


@router.get("/models", response_model=ModelList)
def list_models(state: ApiState = Depends(get_state)) -> ModelList:
    """Trained models on the models volume, newest first."""
    return ModelList(data=_cards(state))


@router.get("/models/{model:model_name}", response_model=ModelCard)
def retrieve_model(model: str, state: ApiState = Depends(get_state)) -> ModelCard:
    """One trained model, by its model path or its fine-tuning job's `ft:` name (404 when there is none)."""
    from trainkit_core.errors import NotFoundError
    from trainkit_core.models.trained import parse_model_path

    if model.startswith("ft:"):
        from trainkit_api.fine_tuning.jobs import fine_tuned_model_path

        run_id = parse_model_path(fine_tuned_model_path(state, model)).run_id
    else:
        run_id = parse_model_path(model).run_id
    for card in _cards(state):
        if card.run_id == run_id:
            return card.model_copy(update={"id": model})
    raise NotFoundError(f"no trained model {model[:120]!r}", hint="GET /v1/models lists the trained models")


def build_router() -> APIRouter:
    return router
