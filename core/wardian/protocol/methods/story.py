"""The story of records: `request/show` and `request/status` (every fact about one record), `request/trace` (with
its answer and its turn's interrupts) and `exchange/page` (the operator's timeline of every record)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, with_config
from typing_extensions import TypedDict

from wardian.model import (
    OPERATOR_UUID,
    ExchangePage,
    ExchangeRecord,
    InterruptFact,
    RecordDelivery,
    RecordStory,
    RequestTrace,
    TaskStory,
)
from wardian.protocol.methods.base import (
    CLOSED,
    AgentField,
    InteractionResult,
    LimitField,
    Params,
    PartyResult,
    RecordIdField,
    RecordKind,
    ReplyStatusName,
    SenderKind,
    SessionParams,
    interaction_result,
    party_result,
    sender_kind,
)
from wardian.protocol.methods.tasks import TaskFactsResult, task_facts_result
from wardian.protocol.methods.usage import TokenUsageResult, token_usage_result

# --- params ------------------------------------------------------------------------------------------------


class RequestShowParams(Params):
    id: RecordIdField


class RequestStatusParams(SessionParams):
    request_id: RecordIdField


class RequestTraceParams(Params):
    id: RecordIdField


class ExchangePageParams(Params):
    # One agent's name or UUID, or `operator`: records to or from it. Omitted: everyone's.
    agent: AgentField | None = None
    kind: RecordKind | None = None
    uncertain: bool = False  # only records whose delivery is uncertain (a task's, or a push's)
    before: Annotated[int, Field(ge=1)] | None = None  # a record's `seq`: the page of records older than it
    limit: LimitField = 50


# --- one record's story ----------------------------------------------------------------------------------------


@with_config(CLOSED)
class DeliveryResult(TypedDict):
    received_at: int | None
    acked_at: int | None
    push: Literal["sending", "done", "uncertain"] | None
    pushed_at: int | None
    push_note: str | None


def delivery_result(d: RecordDelivery) -> DeliveryResult:
    push: Literal["sending", "done", "uncertain"] | None = (
        "sending" if d.push_state == "sending" else "done" if d.push_state == "done"
        else "uncertain" if d.push_state == "uncertain" else None)
    return {"received_at": d.received_at, "acked_at": d.acked_at, "push": push, "pushed_at": d.pushed_at,
            "push_note": d.push_note}


@with_config(CLOSED)
class TaskDeadlineResult(TypedDict):
    deadline_at: int | None
    end_reason: Literal["deadline_exceeded"] | None


@with_config(CLOSED)
class TaskChainResult(TypedDict):
    parent_request_id: str | None
    """The task its sender was working on when it made this one (None: a chain's root)."""
    root_request_id: str | None
    depth: int


def _deadline(t: TaskStory) -> TaskDeadlineResult:
    b = t.bounds
    ended: Literal["deadline_exceeded"] | None = "deadline_exceeded" if b and b.end_reason else None
    return {"deadline_at": b.deadline_at if b else None, "end_reason": ended}


def _chain(t: TaskStory) -> TaskChainResult:
    line = t.bounds.lineage if t.bounds else None
    if line is None:
        return {"parent_request_id": None, "root_request_id": None, "depth": 1}
    return {"parent_request_id": line.parent_request_id, "root_request_id": line.root_request_id, "depth": line.depth}


@with_config(CLOSED)
class TaskStoryResult(TypedDict):
    requester: PartyResult
    facts: TaskFactsResult
    uncertain_reason: str | None
    provider_message_id: str | None
    outcome_status: ReplyStatusName | None
    outcome_at: int | None
    lookup_note: str | None
    rejections: int
    """Submissions of this task the provider definitely refused (nothing was accepted), each followed by the task
    being offered again: it was never uncertain for them."""
    rejection_note: str | None
    """The provider's words for the last of them."""
    usage: TokenUsageResult | None
    """The tokens of the turn that answered it (docs/guide/teams.md#usage); None: unknown, or not answered yet."""
    deadline: TaskDeadlineResult
    chain: TaskChainResult


@with_config(CLOSED)
class AnswerResult(TypedDict):
    id: str
    kind: RecordKind
    status: ReplyStatusName | None
    sender_kind: SenderKind
    created_at: int
    text: str


@with_config(CLOSED)
class RecordStoryResult(InteractionResult):
    delivery: DeliveryResult
    task: TaskStoryResult | None
    answer: AnswerResult | None


def record_story_result(s: RecordStory) -> RecordStoryResult:
    t, a = s.task, s.answer
    return {
        **interaction_result(s.interaction),
        "delivery": delivery_result(s.delivery),
        "task": None if t is None else {
            "requester": party_result(t.requester), "facts": task_facts_result(t.facts),
            "uncertain_reason": t.uncertain_reason, "provider_message_id": t.provider_message_id,
            "outcome_status": t.outcome_status.value if t.outcome_status else None, "outcome_at": t.outcome_at,
            "lookup_note": t.lookup_note, "rejections": t.rejections, "rejection_note": t.rejection_note,
            "usage": token_usage_result(t.usage), "deadline": _deadline(t), "chain": _chain(t)},
        "answer": None if a is None else {
            "id": a.id, "kind": a.kind.value, "status": a.status.value if a.status else None,
            "sender_kind": sender_kind(a.sender), "created_at": a.created_at, "text": a.text},
    }


# --- the exchange timeline ---------------------------------------------------------------------------------------


@with_config(CLOSED)
class ExchangeRecordResult(InteractionResult):
    # `text` holds at most EXCHANGE_PREVIEW_CHARS characters; `text_chars` says how long the whole text is.
    seq: int  # the record's place in the store's order (newest highest): what `before` pages by
    text_chars: int
    delivery: DeliveryResult
    task: TaskFactsResult | None
    uncertain_reason: str | None


def exchange_record_result(r: ExchangeRecord) -> ExchangeRecordResult:
    i = r.interaction
    # Spelled out rather than built on `interaction_result`: `seq` leads and `text_chars` follows `text`, the key
    # order the console's clients have always seen.
    return {"seq": r.seq, "id": i.id, "kind": i.kind.value, "sender": party_result(i.sender) if i.sender else None,
            "sender_kind": sender_kind(i.sender), "recipient": party_result(i.recipient), "text": i.text,
            "text_chars": r.text_chars, "created_at": i.created_at, "request_id": i.request_id,
            "status": i.status.value if i.status else None, "delivery": delivery_result(r.delivery),
            "task": task_facts_result(r.task) if r.task else None, "uncertain_reason": r.uncertain_reason}


@with_config(CLOSED)
class ExchangePageResult(TypedDict):
    records: list[ExchangeRecordResult]  # newest first
    older: int | None  # the `before` of the next (older) page; None: this is the oldest
    # With an agent filter, a page searches a bounded window of records (EXCHANGE_WINDOW): when the window ended before
    # the page was full, every match down to this seq is shown and `older` goes on below it.
    searched_to: int | None


def exchange_page_result(p: ExchangePage) -> ExchangePageResult:
    return {"records": [exchange_record_result(r) for r in p.records], "older": p.older, "searched_to": p.searched_to}


# --- a trace -------------------------------------------------------------------------------------------------------


@with_config(CLOSED)
class InterruptFactResult(TypedDict):
    interrupt_id: int
    caller: PartyResult
    caller_kind: Literal["agent", "operator"]
    target: PartyResult
    turn_id: str
    created_at: int


def interrupt_fact_result(f: InterruptFact) -> InterruptFactResult:
    return {"interrupt_id": f.interrupt_id, "caller": party_result(f.caller),
            "caller_kind": "operator" if f.caller.uuid == OPERATOR_UUID else "agent", "target": party_result(f.target),
            "turn_id": f.turn_id, "created_at": f.created_at}


@with_config(CLOSED)
class RequestTraceResult(TypedDict):
    story: RecordStoryResult  # a reply's or notice's trace is its task's
    answer: RecordStoryResult | None  # the reply or notice, with how it reached the requester
    interrupts: list[InterruptFactResult]  # recorded against the task's turn
    turn_tasks: list[str]  # every task that turn carried (this one included)


def request_trace_result(t: RequestTrace) -> RequestTraceResult:
    return {"story": record_story_result(t.story),
            "answer": record_story_result(t.answer) if t.answer is not None else None,
            "interrupts": [interrupt_fact_result(f) for f in t.interrupts], "turn_tasks": list(t.turn_tasks)}
