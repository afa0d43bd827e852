"""A run's events: a page after a sequence number, or a live server-sent-event stream."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse
from pydantic import BeforeValidator

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.routes.runs import RunId
from trainkit_api.run_paths import run_route
from trainkit_api.schemas import EventPage, event_dicts
from trainkit_api.sse import HEADERS, RECONCILE_S, parse_last_event_id, parse_seq, run_event_stream
from trainkit_api.state import ApiState, event_log, get_state
from trainkit_core.runs.events import all_written
from trainkit_core.runs.reconcile import reconcile_run
from trainkit_core.runs.training_run import TrainingRun

#: Sequence numbers are parsed strictly (ASCII digits only), in the query and the header.
Seq = Annotated[int, BeforeValidator(parse_seq)]
After = Annotated[Seq, Query(ge=0, le=10**15, description="Only events with a sequence number above this.")]

STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "`text/event-stream`: one event per log entry (`id:` = its `seq`, `event:` = its type), then `end`.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


def _done_check(run: TrainingRun, log: Any) -> Any:
    """`is_done` for the stream: reload the record, reconcile now and then; done once the log holds the end."""
    last = [time.monotonic()]

    def is_done() -> bool:
        run.reload()
        if not run.ended() and time.monotonic() - last[0] > RECONCILE_S:
            last[0] = time.monotonic()
            reconcile_run(run)
        return all_written(run.ended(), run.ended_at, log)

    return is_done


router = APIRouter(prefix="/v1", tags=["runs"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)


@run_route(router, "GET", "/{run_id}/events", response_model=EventPage)
def list_events(
    run_id: RunId,
    state: ApiState = Depends(get_state),
    after: After = 0,
    limit: Annotated[Seq, Query(ge=1, le=10_000)] = 1000,
) -> EventPage:
    """Events after `after`, oldest first; ask again with the last `seq` for more."""
    run = state.run(run_id)
    log = event_log(run)
    return EventPage(data=event_dicts(log.read(after, limit=limit)), last_seq=log.last_seq(), done=run.ended())


@run_route(router, "GET", "/{run_id}/events/stream", response_class=StreamingResponse, responses=STREAM_DOC)
def stream_events(
    run_id: RunId,
    state: ApiState = Depends(get_state),
    after: After = 0,
    last_event_id: Annotated[
        str | None,
        Header(
            pattern=r"^[ \t]*([0-9]{1,16})?[ \t]*$",
            description="Sent by a reconnecting client: resume after this sequence number.",
        ),
    ] = None,
) -> StreamingResponse:
    """Follow a run live as server-sent events; the stream ends when the run ends."""
    run = state.run(run_id)  # 404 now, not half-way into a stream
    resume = parse_last_event_id(last_event_id)
    start = resume if resume is not None else after
    log = event_log(run)

    def final() -> dict[str, Any]:
        return {"run_id": run.id, "status": run.status, "error": run.error_message, "last_seq": log.last_seq()}

    body = run_event_stream(log, after=start, is_done=_done_check(run, log), final=final)
    return StreamingResponse(body, media_type="text/event-stream", headers=HEADERS)


def build_router() -> APIRouter:
    return router
