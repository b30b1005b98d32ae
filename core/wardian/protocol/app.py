"""The app's control protocol: one entry per method in `METHODS`, name -> (Params, Result, handler).

`METHODS` is the only method table: the app's service builds its dispatch from it, and the contract tests
validate every method's actual result against the result type it declares (`validate_result`).

Params are strict pydantic models (`extra="forbid"`, no coercion: `true` is not an int, `"10"` is not an
int). `parse_params` turns a validation failure into the one wardian error that names the field and what
is allowed, so the CLI, the MCP server and raw socket clients all get the same answer for the same mistake.
The validators below are also what the MCP tool schemas are built from, so the bounds exist once.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    with_config,
)
from typing_extensions import TypedDict

from wardian import errors
from wardian.model import (
    DEFAULT_RECEIVE_LIMIT,
    MAX_AGENT_NAME_CHARS,
    MAX_CURSOR_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_RECEIVE_LIMIT,
    MAX_REQUEST_ID_CHARS,
    MAX_TARGET_CHARS,
    MAX_WAIT_MS,
    OPERATOR_NAME,
    OPERATOR_UUID,
    PROVIDERS,
    Agent,
    AgentOverview,
    ExchangePage,
    ExchangeRecord,
    InteractionKind,
    InterruptFact,
    InterruptReceipt,
    LogRecord,
    ManagedAgent,
    Party,
    Receipt,
    ReceivedRecord,
    ReceivePage,
    RecordDelivery,
    RecordStory,
    ReplyReceipt,
    RequestTrace,
    TaskFacts,
    WakeReason,
)
from wardian.overrides import MAX_OVERRIDES, check_override, masked_setting
from wardian.protocol.tools import parse_tool_names

# Names that address everyone; a target must name exactly one agent (seed: "broadcasts fail").
BROADCAST_NAMES = frozenset({"*", "all", "@all", "everyone", "@everyone", "@here", "here", "broadcast"})
_BROADCAST_CHARS = re.compile(r"[\s,;*?\[\]{}|]")
AGENT_NAME_RE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_AGENT_NAME_CHARS - 1}}}$")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


# --- field checks (each raises the precise wardian error) -------------------------------------------------


def check_target(value: str) -> str:
    if not value.strip():
        raise errors.InvalidTarget("target is empty; give one agent's exact name or UUID", field="target",
                                   allowed="one agent name or UUID")
    if len(value) > MAX_TARGET_CHARS:
        raise errors.InvalidTarget(f"target is longer than {MAX_TARGET_CHARS} characters", field="target",
                                   allowed=f"1..{MAX_TARGET_CHARS} characters")
    if value.lower() in BROADCAST_NAMES or _BROADCAST_CHARS.search(value.strip()):
        raise errors.BroadcastNotAllowed(
            "target addresses more than one agent; broadcasts and lists are not allowed, address exactly "
            "one agent by name or UUID", field="target", allowed="one agent name or UUID")
    if value != value.strip():
        raise errors.InvalidTarget("target has leading or trailing whitespace", field="target",
                                   allowed="one agent name or UUID")
    return value


def check_text(value: str, field: str = "message") -> str:
    if not value.strip():
        raise errors.EmptyMessage(f"{field} is empty or only whitespace; write the text to send",
                                  field=field, allowed=f"1..{MAX_MESSAGE_BYTES} UTF-8 bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise errors.InvalidText(f"{field} contains a lone surrogate, which is not valid Unicode text",
                                 field=field, allowed="valid Unicode text without NUL") from None
    if size > MAX_MESSAGE_BYTES:
        raise errors.MessageTooLarge(
            f"{field} is {size} UTF-8 bytes; the limit is {MAX_MESSAGE_BYTES}", field=field,
            allowed=f"1..{MAX_MESSAGE_BYTES} UTF-8 bytes", limit_bytes=MAX_MESSAGE_BYTES, size_bytes=size)
    if "\x00" in value:
        # Our choice (reliability-matrix §3.5): NUL has no meaning in peer prose and truncates C strings
        # and terminals downstream, so it is refused rather than stored.
        raise errors.InvalidText(f"{field} contains a NUL character (U+0000), which is not allowed",
                                 field=field, allowed="valid Unicode text without NUL")
    return value


def check_cursor(value: str | None, field: str) -> str | None:
    if value == "":  # a cursor is never empty (the tool schema's minLength 1): refused here, not by the store
        raise errors.InvalidCursor(f"{field} is empty; pass a cursor from an earlier receive result, or omit it",
                                   field=field, allowed="a cursor returned by an earlier receive")
    return value


def check_agent_name(value: str) -> str:
    if (not AGENT_NAME_RE.match(value) or value.lower() in BROADCAST_NAMES or _UUID_RE.match(value)
            or value.lower() in ("wardian", OPERATOR_NAME)):
        raise errors.InvalidAgentName(
            f"agent name {value[:80]!r} is not allowed", field="name",
            allowed=f"1..{MAX_AGENT_NAME_CHARS} characters of A-Z a-z 0-9 . _ -, starting with a letter or "
            "digit; not a UUID and not all/everyone/wardian/operator")
    return value


# --- models ------------------------------------------------------------------------------------------------

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)

Session = Annotated[str, Field(min_length=1, max_length=256)]
TargetField = Annotated[str, Field(description="Exact agent name or UUID.")]
MessageField = Annotated[str, Field(description="Text, kept exactly.")]
LimitField = Annotated[int, Field(ge=1, le=MAX_RECEIVE_LIMIT)]
TimeoutField = Annotated[int, Field(ge=0, le=MAX_WAIT_MS)]
CursorField = Annotated[str, Field(max_length=MAX_CURSOR_CHARS)]


class _Params(BaseModel):
    model_config = _STRICT


class _SessionParams(_Params):
    session: Session


class MessageSendParams(_SessionParams):
    target: TargetField
    message: MessageField

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)

    @field_validator("message")
    @classmethod
    def _message(cls, v: str) -> str:
        return check_text(v)


class TaskFollowupParams(MessageSendParams):
    pass


class MailboxReceiveParams(_SessionParams):
    cursor: CursorField | None = None
    ack_cursor: CursorField | None = None
    limit: LimitField | None = None
    timeout_ms: TimeoutField | None = None

    @field_validator("cursor", "ack_cursor")
    @classmethod
    def _cursor(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_cursor(v, str(info.field_name))


class MailboxWaitParams(_SessionParams):
    timeout_ms: TimeoutField | None = None


class TaskReplyParams(_SessionParams):
    request_id: Annotated[str, Field(min_length=1, max_length=MAX_REQUEST_ID_CHARS)]
    status: Literal["done", "blocked", "failed"]
    message: MessageField

    @field_validator("message")
    @classmethod
    def _message(cls, v: str) -> str:
        return check_text(v)


class AgentInterruptParams(_SessionParams):
    target: TargetField

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)


class AgentListParams(_Params):
    session: Session | None = None


class AgentAddParams(_Params):
    name: str
    provider: str
    workspace: Annotated[str, Field(min_length=1, max_length=4096)] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_agent_name(v)

    @field_validator("provider")
    @classmethod
    def _provider(cls, v: str) -> str:
        if v not in PROVIDERS:
            raise errors.InvalidProvider(f"provider {v[:40]!r} is not supported", field="provider",
                                         allowed=", ".join(PROVIDERS))
        return v


class AgentSessionParams(_Params):
    agent: Annotated[str, Field(min_length=1, max_length=MAX_TARGET_CHARS)]


class AgentStartParams(_Params):
    agent: Annotated[str, Field(min_length=1, max_length=MAX_TARGET_CHARS)]
    mode: Literal["background", "attached"] | None = None
    """None (absent): the mode of the agent's last start, else background."""
    config: Annotated[list[str], Field(max_length=MAX_OVERRIDES)] | None = None
    """The agent's `-c` settings, replacing the saved ones (kept with the agent for later starts); None (absent):
    start with the saved settings."""
    approve_tools: Annotated[list[str], Field(max_length=16)] = []
    reset_settings: bool = False
    """Forget the saved `-c` settings and start without any; refused together with `config`."""
    keep_settings: bool = False
    """Start with the saved mode and settings: what leaving out `mode` and `config` does (the console's start
    button sends it); refused together with either, or with `reset_settings`."""

    @field_validator("approve_tools")
    @classmethod
    def _tools(cls, v: list[str]) -> list[str]:
        return list(parse_tool_names(v))

    @field_validator("config")
    @classmethod
    def _config(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [check_override(item) for item in v]


class AgentStopParams(_Params):
    agent: Annotated[str, Field(min_length=1, max_length=MAX_TARGET_CHARS)]


class AgentAttachParams(AgentStopParams):
    pass


class EmptyParams(_Params):
    pass


class MailboxRecordsParams(_Params):
    limit: Annotated[int, Field(ge=1, le=100_000)] = 1000


class AgentRemoveParams(AgentStopParams):
    pass


class AgentRevokeParams(_Params):
    agent: Annotated[str, Field(min_length=1, max_length=MAX_TARGET_CHARS)]
    all: bool = False


RecordIdField = Annotated[str, Field(min_length=1, max_length=MAX_REQUEST_ID_CHARS)]


class RequestShowParams(_Params):
    id: RecordIdField


class RequestStatusParams(_SessionParams):
    request_id: RecordIdField


class OperatorSendParams(_Params):
    """`message/send` and `task/followup` as the operator (#16): no session; the control socket's peer uid check is what
    makes the caller the operator."""

    target: TargetField
    message: MessageField

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)

    @field_validator("message")
    @classmethod
    def _message(cls, v: str) -> str:
        return check_text(v)


class OperatorReceiveParams(_Params):
    cursor: CursorField | None = None
    ack_cursor: CursorField | None = None
    limit: LimitField | None = None
    timeout_ms: TimeoutField | None = None

    @field_validator("cursor", "ack_cursor")
    @classmethod
    def _cursor(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_cursor(v, str(info.field_name))


class OperatorInterruptParams(_Params):
    target: TargetField

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)


class ExchangePageParams(_Params):
    # One agent's name or UUID, or `operator`: records to or from it. Omitted: everyone's.
    agent: Annotated[str, Field(min_length=1, max_length=MAX_TARGET_CHARS)] | None = None
    kind: Literal["information", "task", "reply", "notice"] | None = None
    uncertain: bool = False  # only records whose delivery is uncertain (a task's, or a push's)
    before: Annotated[int, Field(ge=1)] | None = None  # a record's `seq`: the page of records older than it
    limit: LimitField = 50


class RequestTraceParams(_Params):
    id: RecordIdField


# Results: one closed TypedDict per method result, each built by the function right after it from the store's
# records. TypedDicts, not models: a receive page of 100 records costs ~25 µs as dicts and ~0.4-1.1 ms as pydantic
# models (measured for #12), and pyright checks every builder's keys and types against its TypedDict. `extra`
# forbid makes `validate_result` (the contract tests) refuse any key a builder adds that the type lacks.

_CLOSED = ConfigDict(extra="forbid")


@with_config(_CLOSED)
class PartyResult(TypedDict):
    name: str
    uuid: str


def party_result(p: Party | Agent) -> PartyResult:
    return {"name": p.name, "uuid": p.uuid}


# Who wrote a record: an agent, the operator (the person running the agents, #16), or Wardian itself (notices).
SenderKind = Literal["agent", "operator", "wardian"]


def sender_kind(p: Party | None) -> SenderKind:
    return "wardian" if p is None else "operator" if p.uuid == OPERATOR_UUID else "agent"


@with_config(_CLOSED)
class TaskFactsResult(TypedDict):
    state: Literal["pending", "claimed", "submitted", "uncertain", "completed"]
    claimed_by: Literal["receive", "dispatch", "reply"] | None
    claim_generation: int | None
    claimed_at: int | None
    submitted_at: int | None
    thread_id: str | None
    turn_id: str | None
    uncertain_at: int | None
    completed_at: int | None
    reply_status: Literal["done", "blocked", "failed"] | None
    reply_id: str | None
    lookup: Literal["confirmed", "not_found"] | None


def task_facts_result(f: TaskFacts) -> TaskFactsResult:
    return {"state": f.state.value, "claimed_by": f.claimed_by.value if f.claimed_by else None,
            "claim_generation": f.claim_generation, "claimed_at": f.claimed_at, "submitted_at": f.submitted_at,
            "thread_id": f.thread_id, "turn_id": f.turn_id, "uncertain_at": f.uncertain_at,
            "completed_at": f.completed_at, "reply_status": f.reply_status.value if f.reply_status else None,
            "reply_id": f.reply_id, "lookup": f.lookup}


@with_config(_CLOSED)
class RecordResult(TypedDict):
    id: str
    kind: Literal["information", "task", "reply", "notice"]
    sender: PartyResult | None
    sender_kind: SenderKind
    recipient: PartyResult
    text: str
    created_at: int
    request_id: str | None
    status: Literal["done", "blocked", "failed"] | None
    new_work: bool
    task: TaskFactsResult | None


def record_result(r: ReceivedRecord) -> RecordResult:
    i = r.interaction
    return {"id": i.id, "kind": i.kind.value, "sender": party_result(i.sender) if i.sender else None,
            "sender_kind": sender_kind(i.sender), "recipient": party_result(i.recipient),
            "text": i.text, "created_at": i.created_at, "request_id": i.request_id,
            "status": i.status.value if i.status else None, "new_work": r.new_work,
            "task": task_facts_result(r.task) if r.task else None}


@with_config(_CLOSED)
class LogRecordResult(TypedDict):
    id: str
    kind: Literal["information", "task", "reply", "notice"]
    sender: PartyResult | None
    sender_kind: SenderKind
    recipient: PartyResult
    text: str
    created_at: int
    request_id: str | None
    status: Literal["done", "blocked", "failed"] | None
    acked: bool
    task: TaskFactsResult | None


def log_record_result(r: LogRecord) -> LogRecordResult:
    i = r.interaction
    return {"id": i.id, "kind": i.kind.value, "sender": party_result(i.sender) if i.sender else None,
            "sender_kind": sender_kind(i.sender), "recipient": party_result(i.recipient),
            "text": i.text, "created_at": i.created_at, "request_id": i.request_id,
            "status": i.status.value if i.status else None, "acked": i.acked,
            "task": task_facts_result(r.task) if r.task else None}


Delivery = Literal["admitted", "provider_visible"]


@with_config(_CLOSED)
class SendResult(TypedDict):
    interaction_id: str
    kind: Literal["information", "task"]
    request_id: str | None
    sender: PartyResult
    target: PartyResult
    delivery: Delivery
    created_at: int


def send_result(r: Receipt, delivery: Delivery) -> SendResult:
    kind: Literal["information", "task"] = "task" if r.kind is InteractionKind.TASK else "information"
    return {"interaction_id": r.interaction_id, "kind": kind, "request_id": r.request_id,
            "sender": party_result(r.sender), "target": party_result(r.recipient), "delivery": delivery,
            "created_at": r.created_at}


@with_config(_CLOSED)
class ReceiveResult(TypedDict):
    records: list[RecordResult]
    cursor: str | None
    acked: int
    more: bool
    timed_out: bool
    wake_reason: WakeReason | None


def receive_result(p: ReceivePage, *, cursor: str | None, timed_out: bool,
                   wake_reason: WakeReason | None) -> ReceiveResult:
    return {"records": [record_result(r) for r in p.records], "cursor": cursor, "acked": p.acked, "more": p.more,
            "timed_out": timed_out, "wake_reason": wake_reason}


@with_config(_CLOSED)
class WaitResult(TypedDict):
    woke: bool
    timed_out: bool
    wake_reason: WakeReason | None


@with_config(_CLOSED)
class ReplyResult(TypedDict):
    reply_id: str
    request_id: str
    status: Literal["done", "blocked", "failed"]
    requester: PartyResult
    delivery: Delivery
    created_at: int


def reply_result(r: ReplyReceipt, delivery: Delivery) -> ReplyResult:
    return {"reply_id": r.reply_id, "request_id": r.request_id, "status": r.status.value,
            "requester": party_result(r.requester), "delivery": delivery, "created_at": r.created_at}


@with_config(_CLOSED)
class InterruptResult(TypedDict):
    interrupt_id: int
    target: PartyResult
    turn_id: str
    state: Literal["requested"]
    created_at: int


def interrupt_result(r: InterruptReceipt) -> InterruptResult:
    return {"interrupt_id": r.interrupt_id, "target": party_result(r.target), "turn_id": r.turn_id,
            "state": "requested", "created_at": r.created_at}


@with_config(_CLOSED)
class AgentResult(TypedDict):
    name: str
    uuid: str
    provider: str
    status: Literal["off", "starting", "idle", "active", "errored"]
    active_turn_id: str | None
    generation: int
    workspace: str | None
    created_at: int
    host: str | None
    """The host whose app serves the agent (#15): on the embedded store, this app's host."""


def agent_result(a: Agent) -> AgentResult:
    return {"name": a.name, "uuid": a.uuid, "provider": a.provider, "status": a.status.value,
            "active_turn_id": a.active_turn_id, "generation": a.generation, "workspace": a.workspace,
            "created_at": a.created_at, "host": a.host}


@with_config(_CLOSED)
class HostResult(TypedDict):
    live: bool
    """An app serves the host now: its lease is unexpired (renewed by heartbeat every few seconds)."""
    heartbeat_at: int | None


@with_config(_CLOSED)
class DeliveryDoubtsResult(TypedDict):
    uncertain: int
    confirmed_by_lookup: int


@with_config(_CLOSED)
class ManagedAgentResult(TypedDict):
    mode: Literal["background", "attached"] | None
    """The mode of the agent's last start (a plain `agent start` uses it again)."""
    settings: list[str]
    """The `-c` settings a plain `agent start` uses again, values of secret-looking keys masked (`********`)."""
    thread_id: str | None
    """The agent's conversation (Codex thread, OpenCode session), resumed by its next start."""
    previous_thread_id: str | None
    """The conversation `thread_id` replaced, because its provider no longer had it (never materialised, deleted)."""
    thread_replaced_at: int | None
    thread_replaced_reason: str | None


def managed_agent_result(a: ManagedAgent) -> ManagedAgentResult:
    mode = a.mode if a.mode in ("background", "attached") else None
    return {"mode": mode, "settings": [masked_setting(o) for o in a.overrides],
            "thread_id": a.thread_id, "previous_thread_id": a.previous_thread_id,
            "thread_replaced_at": a.thread_replaced_at, "thread_replaced_reason": a.thread_replaced_reason}


@with_config(_CLOSED)
class AgentListResult(TypedDict):
    agents: list[AgentResult]
    caller: PartyResult | None
    deliveries: dict[str, DeliveryDoubtsResult]
    """By agent UUID, agents with any: tasks given to it whose delivery is uncertain, and those whose provider answer
    was lost but a lookup of the message found it (#14)."""
    hosts: dict[str, HostResult]
    """By host name, every host of the store (#15): an agent whose host is not live is offline (its tasks wait)."""
    managed: NotRequired[dict[str, ManagedAgentResult]]
    """By agent UUID, for the operator only (absent when a session asks): what the app keeps to start each agent."""


@with_config(_CLOSED)
class AgentSessionResult(TypedDict):
    agent: AgentResult
    session_id: str
    home: str


@with_config(_CLOSED)
class AppStatusResult(TypedDict):
    running: bool
    version: str
    protocol: int
    pid: int
    home: str
    started_at: int
    agents: int
    waiting: int  # waits (`mailbox/wait`, receives with a timeout) subscribed right now
    console: str | None  # the web console's address (`--console`), without any login secret; None when not served


@with_config(_CLOSED)
class MailboxRecordsResult(TypedDict):
    records: list[LogRecordResult]


@with_config(_CLOSED)
class OkResult(TypedDict):
    ok: bool


@with_config(_CLOSED)
class AgentStartResult(TypedDict):
    agent: AgentResult
    thread_id: str | None
    generation: int
    provider_version: str


@with_config(_CLOSED)
class AgentStopResult(TypedDict):
    agent: AgentResult
    stopped: bool


@with_config(_CLOSED)
class AgentRemoveResult(TypedDict):
    agent: AgentResult
    answered: list[str]  # the request ids of its open tasks, each answered with a `failed` notice
    uncertain: list[str]  # the request ids of its tasks whose turn outcome is unknown


@with_config(_CLOSED)
class AgentRevokeResult(TypedDict):
    agent: AgentResult
    revoked: int


@with_config(_CLOSED)
class DeliveryResult(TypedDict):
    received_at: int | None
    acked_at: int | None
    push: Literal["sending", "done", "uncertain"] | None
    pushed_at: int | None
    push_note: str | None


@with_config(_CLOSED)
class TaskStoryResult(TypedDict):
    requester: PartyResult
    facts: TaskFactsResult
    uncertain_reason: str | None
    provider_message_id: str | None
    outcome_status: Literal["done", "blocked", "failed"] | None
    outcome_at: int | None
    lookup_note: str | None
    rejections: int
    """Submissions of this task the provider definitely refused (nothing was accepted), each followed by the task
    being offered again: it was never uncertain for them."""
    rejection_note: str | None
    """The provider's words for the last of them."""


@with_config(_CLOSED)
class AnswerResult(TypedDict):
    id: str
    kind: Literal["information", "task", "reply", "notice"]
    status: Literal["done", "blocked", "failed"] | None
    sender_kind: SenderKind
    created_at: int
    text: str


@with_config(_CLOSED)
class RecordStoryResult(TypedDict):
    id: str
    kind: Literal["information", "task", "reply", "notice"]
    sender: PartyResult | None
    sender_kind: SenderKind
    recipient: PartyResult
    text: str
    created_at: int
    request_id: str | None
    status: Literal["done", "blocked", "failed"] | None
    delivery: DeliveryResult
    task: TaskStoryResult | None
    answer: AnswerResult | None


def record_story_result(s: RecordStory) -> RecordStoryResult:
    i, t, a = s.interaction, s.task, s.answer
    return {
        "id": i.id, "kind": i.kind.value, "sender": party_result(i.sender) if i.sender else None,
        "sender_kind": sender_kind(i.sender), "recipient": party_result(i.recipient), "text": i.text,
        "created_at": i.created_at, "request_id": i.request_id, "status": i.status.value if i.status else None,
        "delivery": delivery_result(s.delivery),
        "task": None if t is None else {
            "requester": party_result(t.requester), "facts": task_facts_result(t.facts),
            "uncertain_reason": t.uncertain_reason, "provider_message_id": t.provider_message_id,
            "outcome_status": t.outcome_status.value if t.outcome_status else None, "outcome_at": t.outcome_at,
            "lookup_note": t.lookup_note, "rejections": t.rejections, "rejection_note": t.rejection_note},
        "answer": None if a is None else {
            "id": a.id, "kind": a.kind.value, "status": a.status.value if a.status else None,
            "sender_kind": sender_kind(a.sender), "created_at": a.created_at, "text": a.text},
    }


def delivery_result(d: RecordDelivery) -> DeliveryResult:
    push: Literal["sending", "done", "uncertain"] | None = (
        "sending" if d.push_state == "sending" else "done" if d.push_state == "done"
        else "uncertain" if d.push_state == "uncertain" else None)
    return {"received_at": d.received_at, "acked_at": d.acked_at, "push": push, "pushed_at": d.pushed_at,
            "push_note": d.push_note}


@with_config(_CLOSED)
class ConsoleLoginResult(TypedDict):
    url: str  # the one-time login URL; it holds a secret: print it to its owner, never log it
    expires_at: int


@with_config(_CLOSED)
class AgentOverviewResult(TypedDict):
    agent: AgentResult
    pending: int
    in_flight: int
    host_live: bool
    """An app serves the agent's host now (#15)."""
    local: bool
    """The agent belongs to this app's host: only here can it be started or stopped."""
    managed: ManagedAgentResult | None
    """Its saved mode and settings and its conversation (a replaced one included); None for an agent no app has
    started."""


@with_config(_CLOSED)
class AgentOverviewListResult(TypedDict):
    agents: list[AgentOverviewResult]


def agent_overview_result(o: AgentOverview, *, host_live: bool = True, local: bool = True,
                          managed: ManagedAgent | None = None) -> AgentOverviewResult:
    return {"agent": agent_result(o.agent), "pending": o.pending, "in_flight": o.in_flight, "host_live": host_live,
            "local": local, "managed": managed_agent_result(managed) if managed is not None else None}


@with_config(_CLOSED)
class ExchangeRecordResult(TypedDict):
    seq: int  # the record's place in the store's order (newest highest): what `before` pages by
    id: str
    kind: Literal["information", "task", "reply", "notice"]
    sender: PartyResult | None
    sender_kind: SenderKind
    recipient: PartyResult
    text: str  # at most EXCHANGE_PREVIEW_CHARS characters; `text_chars` says how long the whole text is
    text_chars: int
    created_at: int
    request_id: str | None
    status: Literal["done", "blocked", "failed"] | None
    delivery: DeliveryResult
    task: TaskFactsResult | None
    uncertain_reason: str | None


def exchange_record_result(r: ExchangeRecord) -> ExchangeRecordResult:
    i = r.interaction
    return {"seq": r.seq, "id": i.id, "kind": i.kind.value, "sender": party_result(i.sender) if i.sender else None,
            "sender_kind": sender_kind(i.sender), "recipient": party_result(i.recipient), "text": i.text,
            "text_chars": r.text_chars, "created_at": i.created_at, "request_id": i.request_id,
            "status": i.status.value if i.status else None, "delivery": delivery_result(r.delivery),
            "task": task_facts_result(r.task) if r.task else None, "uncertain_reason": r.uncertain_reason}


@with_config(_CLOSED)
class ExchangePageResult(TypedDict):
    records: list[ExchangeRecordResult]  # newest first
    older: int | None  # the `before` of the next (older) page; None: this is the oldest
    # With an agent filter, a page searches a bounded window of records (EXCHANGE_WINDOW): when the window ended before
    # the page was full, every match down to this seq is shown and `older` goes on below it.
    searched_to: int | None


def exchange_page_result(p: ExchangePage) -> ExchangePageResult:
    return {"records": [exchange_record_result(r) for r in p.records], "older": p.older, "searched_to": p.searched_to}


@with_config(_CLOSED)
class InterruptFactResult(TypedDict):
    interrupt_id: int
    caller: PartyResult
    caller_kind: Literal["agent", "operator"]
    target: PartyResult
    turn_id: str
    created_at: int


@with_config(_CLOSED)
class RequestTraceResult(TypedDict):
    story: RecordStoryResult  # a reply's or notice's trace is its task's
    answer: RecordStoryResult | None  # the reply or notice, with how it reached the requester
    interrupts: list[InterruptFactResult]  # recorded against the task's turn
    turn_tasks: list[str]  # every task that turn carried (this one included)


def request_trace_result(t: RequestTrace) -> RequestTraceResult:
    return {"story": record_story_result(t.story),
            "answer": record_story_result(t.answer) if t.answer is not None else None,
            "interrupts": [interrupt_fact_result(f) for f in t.interrupts], "turn_tasks": list(t.turn_tasks)}


def interrupt_fact_result(f: InterruptFact) -> InterruptFactResult:
    return {"interrupt_id": f.interrupt_id, "caller": party_result(f.caller),
            "caller_kind": "operator" if f.caller.uuid == OPERATOR_UUID else "agent", "target": party_result(f.target),
            "turn_id": f.turn_id, "created_at": f.created_at}


@with_config(_CLOSED)
class AgentAttachResult(TypedDict):
    socket: str
    workspace: str
    codex: str
    codex_home: str
    thread_id: str | None
    config: list[str]


@dataclass(frozen=True, slots=True)
class Method:
    """One app method: its params model, its result type, whether it acts for a session's caller, and the name
    of the `AppService` coroutine that serves it (the service's dispatch table is built from this one)."""

    params: type[_Params]
    result: Any  # a closed TypedDict class
    needs_session: bool
    doc: str
    handler: str


METHODS: dict[str, Method] = {
    "message/send": Method(MessageSendParams, SendResult, True, "Send information to one agent.", "send"),
    "task/followup": Method(TaskFollowupParams, SendResult, True, "Assign a task; returns its request id.",
                            "followup"),
    "mailbox/receive": Method(MailboxReceiveParams, ReceiveResult, True, "Read and acknowledge records.", "receive"),
    "mailbox/wait": Method(MailboxWaitParams, WaitResult, True, "Wait for mailbox activity (no body).", "wait"),
    "task/reply": Method(TaskReplyParams, ReplyResult, True, "Complete an assigned task.", "reply"),
    "agent/interrupt": Method(AgentInterruptParams, InterruptResult, True, "Interrupt an active turn.",
                              "interrupt"),
    "agent/list": Method(AgentListParams, AgentListResult, False, "List agents.", "list_agents"),
    "agent/add": Method(AgentAddParams, AgentResult, False, "Register a managed agent.", "add_agent"),
    "agent/session": Method(AgentSessionParams, AgentSessionResult, False, "Issue a session token.", "session"),
    "mailbox/records": Method(MailboxRecordsParams, MailboxRecordsResult, False, "Every record (operator).",
                              "records"),
    "agent/start": Method(AgentStartParams, AgentStartResult, False, "Start an agent's provider runtime.",
                          "start_agent"),
    "agent/stop": Method(AgentStopParams, AgentStopResult, False, "Stop an agent's provider runtime (explicit off).",
                         "stop_agent"),
    "agent/attach": Method(AgentAttachParams, AgentAttachResult, False, "How a terminal UI attaches to an agent.",
                           "attach_agent"),
    "app/status": Method(EmptyParams, AppStatusResult, False, "The app's status.", "status"),
    "app/stop": Method(EmptyParams, OkResult, False, "Stop the app.", "app_stop"),
    "agent/remove": Method(AgentRemoveParams, AgentRemoveResult, False,
                           "Remove an agent: stop it, revoke its sessions, answer its open tasks.", "remove_agent"),
    "agent/revoke": Method(AgentRevokeParams, AgentRevokeResult, False,
                           "Revoke an agent's operator-minted sessions (all of them with `all`).", "revoke_sessions"),
    "request/show": Method(RequestShowParams, RecordStoryResult, False, "Every fact about one record (operator).",
                           "show_record"),
    "request/status": Method(RequestStatusParams, RecordStoryResult, True,
                             "The story of a task the caller sent.", "request_status"),
    # The operator and the web console (#16): the control socket's owner acts as the operator.
    "operator/send": Method(OperatorSendParams, SendResult, False, "Send information as the operator.",
                            "operator_send"),
    "operator/followup": Method(OperatorSendParams, SendResult, False, "Assign a task as the operator.",
                                "operator_followup"),
    "operator/receive": Method(OperatorReceiveParams, ReceiveResult, False,
                               "Read and acknowledge the operator's records (replies to its tasks).",
                               "operator_receive"),
    "operator/interrupt": Method(OperatorInterruptParams, InterruptResult, False,
                                 "Interrupt an agent's active turn as the operator.", "operator_interrupt"),
    "agent/overview": Method(EmptyParams, AgentOverviewListResult, False,
                             "Every agent with its pending and in-flight tasks (operator).", "agent_overview"),
    "exchange/page": Method(ExchangePageParams, ExchangePageResult, False,
                            "A page of every record, newest first, filtered (operator).", "exchange_page"),
    "request/trace": Method(RequestTraceParams, RequestTraceResult, False,
                            "A record's story with its answer's and its turn's interrupts (operator).",
                            "request_trace"),
    "console/login": Method(EmptyParams, ConsoleLoginResult, False,
                            "A fresh one-time login URL of the web console (operator).", "console_login"),
}

# The v1 control operations the seed retires ("Legacy delivery retirement"): they answer with
# `retired_operation` and never deliver.
RETIRED_METHODS = frozenset({"send", "ask", "message/ask", "mailbox/send", "terminal/send", "surface/send"})

# The error a wrong value of each field stands for (reliability-matrix §3.5).
_FIELD_ERRORS: dict[str, type[errors.RequestError]] = {
    "target": errors.InvalidTarget,
    "limit": errors.InvalidLimit,
    "timeout_ms": errors.InvalidTimeout,
    "cursor": errors.InvalidCursor,
    "ack_cursor": errors.InvalidCursor,
    "status": errors.InvalidStatus,
    "request_id": errors.UnknownRequest,
    "id": errors.UnknownRequest,
    "name": errors.InvalidAgentName,
    "provider": errors.InvalidProvider,
    "session": errors.MissingSession,
    "mode": errors.InvalidArguments,
}
_ALLOWED: dict[str, str] = {
    "limit": f"an integer 1..{MAX_RECEIVE_LIMIT}, or null for {DEFAULT_RECEIVE_LIMIT}",
    "timeout_ms": f"an integer 0..{MAX_WAIT_MS} (milliseconds)",
    "status": "done, blocked, failed",
    "target": "one agent name or UUID",
    "cursor": "a cursor returned by an earlier receive",
    "ack_cursor": "a cursor returned by an earlier receive",
    "message": f"a string of 1..{MAX_MESSAGE_BYTES} UTF-8 bytes",
    "request_id": "an ask_ request id",
    "id": "an ask_, msg_, rep_ or ntc_ id",
    "mode": "background, attached",
    "config": f"at most {MAX_OVERRIDES} key=value strings",
    "kind": "information, task, reply, notice",
    "before": "the seq of a record of an earlier page (an integer >= 1)",
    "agent": "one agent's name or UUID",
}
_MISSING: dict[str, type[errors.RequestError]] = {
    "message": errors.EmptyMessage,
    "target": errors.InvalidTarget,
    "status": errors.InvalidStatus,
    "session": errors.MissingSession,
}


def parse_params(method: str, params: Any) -> _Params:
    """Validate `params` for `method`.

    Raises:
        MethodNotFound, RetiredOperation, InvalidArguments or the field's own error.
    """
    if method in RETIRED_METHODS:
        raise errors.RetiredOperation(
            f"{method!r} is a retired v1 control operation and delivers nothing; use message/send for "
            "information or task/followup for work")
    spec = METHODS.get(method)
    if spec is None:
        raise errors.MethodNotFound(f"unknown method {method[:80]!r}", allowed=", ".join(METHODS))
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise errors.InvalidArguments("params must be a JSON object", field="params")
    if spec.needs_session and not params.get("session"):
        raise errors.MissingSession(
            "no managed caller: set WARDIAN_SESSION_ID (print it with `wardian agent env NAME`) in the "
            "environment of the CLI or MCP server", field="session")
    try:
        return spec.params.model_validate(params)
    except ValidationError as exc:
        raise _translate(exc) from None


def _translate(exc: ValidationError) -> errors.WardianError:
    problems = exc.errors(include_url=False)
    # Unknown fields first: "sender" on a send is the one mistake the caller must hear about.
    problems.sort(key=lambda e: e["type"] != "extra_forbidden")
    first = problems[0]
    field = str(first["loc"][0]) if first["loc"] else "params"
    ctx = first.get("ctx") or {}
    original = ctx.get("error")
    if isinstance(original, errors.WardianError):
        return original
    if first["type"] == "extra_forbidden":
        return errors.InvalidArguments(f"unknown argument {field!r}", field=field)
    if first["type"] == "missing":
        cls = _MISSING.get(field, errors.InvalidArguments)
        return cls(f"{field} is required", field=field, allowed=_ALLOWED.get(field))
    cls = _FIELD_ERRORS.get(field, errors.InvalidArguments)
    return cls(f"{field} is invalid: {first['msg']}", field=field, allowed=_ALLOWED.get(field))


@functools.cache
def _result_adapter(method: str) -> TypeAdapter[Any]:
    return TypeAdapter(METHODS[method].result)


def validate_result(method: str, value: Any) -> Any:
    """Check a method's actual result against its declared result type (contract tests; not on the hot path).

    Raises:
        pydantic.ValidationError: a key is missing, extra or of the wrong type.
    """
    return _result_adapter(method).validate_python(value, strict=True)
