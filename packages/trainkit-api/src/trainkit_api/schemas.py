"""Response shapes shared by several routes. Request bodies live beside their route."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trainkit_core.runs.training_run import TrainingRun


class RunList(BaseModel):
    """A page of runs, newest first; pass `next_after` as `after` for the next page."""

    object: Literal["list"] = "list"
    data: list[TrainingRun]
    has_more: bool
    next_after: str | None = None


class Checkpoint(BaseModel):
    step: int
    path: str = Field(description="On the models volume; usable as a `model_path`.")


class CheckpointList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Checkpoint]


class Event(BaseModel):
    """One event of a run's log. `seq` numbers them 1, 2, 3…; the other fields depend on `type`."""

    model_config = ConfigDict(extra="allow")

    seq: int
    time: float
    type: str


class EventPage(BaseModel):
    object: Literal["list"] = "list"
    data: list[Event]
    last_seq: int = Field(description="The highest sequence number written so far.")
    done: bool = Field(description="The run has ended: no event will follow the last one.")


def event_dicts(events: list[dict[str, Any]]) -> list[Event]:
    return [Event.model_validate(e) for e in events]
