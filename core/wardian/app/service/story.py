"""The story of records, for the operator and for a task's requester: `request/show`, `request/status`,
`request/trace` and the `exchange/page` timeline."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wardian import errors
from wardian.app.service.registry import handlers
from wardian.model import OPERATOR_NAME, OPERATOR_UUID, ExchangePage, InteractionKind, RecordStory, RequestTrace
from wardian.protocol.methods import (
    ExchangePageParams,
    ExchangePageResult,
    RecordStoryResult,
    RequestShowParams,
    RequestStatusParams,
    RequestTraceParams,
    RequestTraceResult,
    exchange_page_result,
    record_story_result,
    request_trace_result,
)
from wardian.store import Store, history, roster

if TYPE_CHECKING:
    from wardian.app.service.app import AppService


@handlers.serves("request/show")
async def show_record(app: AppService, p: RequestShowParams) -> RecordStoryResult:
    return record_story_result(await app.writer.call(history.record_story, p.id))


def _own_request(store: Store, session: str, request_id: str) -> RecordStory:
    """The story of a task the session's caller assigned. Raises: UnknownRequest (no such task of the caller's)."""
    caller = roster.authenticate(store, session)
    try:
        story = history.record_story(store, request_id)
    except errors.UnknownRequest:
        story = None
    # Another agent's request, or something that is not a task, is unknown to this caller: the same error
    # as no record at all, so nobody learns what others asked.
    if (story is None or story.interaction.kind is not InteractionKind.TASK or story.task is None
            or story.task.requester.uuid != caller.agent.uuid):
        raise errors.UnknownRequest(f"you sent no task with request id {request_id[:80]!r}",
                                    field="request_id", allowed="the request id of a task you assigned")
    return story


@handlers.serves("request/status")
async def request_status(app: AppService, p: RequestStatusParams) -> RecordStoryResult:
    return record_story_result(await app.writer.call(_own_request, p.session, p.request_id))


def _exchange(store: Store, p: ExchangePageParams) -> ExchangePage:
    """A page of the exchange timeline, for the participant `p.agent` names (the operator's name or UUID too)."""
    participant = None
    if p.agent in (OPERATOR_NAME, OPERATOR_UUID):
        participant = roster.operator(store).agent.id
    elif p.agent is not None:
        participant = roster.resolve_agent(store, p.agent).id
    kind = InteractionKind(p.kind) if p.kind is not None else None
    return history.exchange(store, participant=participant, kind=kind, uncertain=p.uncertain, before=p.before,
                            limit=p.limit)


@handlers.serves("exchange/page")
async def exchange_page(app: AppService, p: ExchangePageParams) -> ExchangePageResult:
    return exchange_page_result(await app.writer.call(_exchange, p))


@handlers.serves("request/trace")
async def request_trace(app: AppService, p: RequestTraceParams) -> RequestTraceResult:
    trace: RequestTrace = await app.writer.call(history.request_trace, p.id)
    return request_trace_result(trace)
