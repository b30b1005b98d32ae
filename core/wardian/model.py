"""Domain records and limits shared by every layer (stdlib only).

Records built per mailbox row on the receive path (`Party`, `TaskFacts`, `Interaction`, `ReceivedRecord`) are
immutable NamedTuples: a frozen dataclass assigns each field through `object.__setattr__`, which made building a
100-record page cost ~0.4 ms here (against the `receive_100_at_1m` target of docs/benchmarks.md); the others are
frozen slotted dataclasses.

Limits are one constant each, so the store, the app protocol and the MCP tool schemas all refer to the same numbers;
they are defined in wardian.limits (which the CLI's client path reads without this module) and re-exported here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal, NamedTuple

from wardian.limits import (  # noqa: F401  (re-exported: the limits are part of the model)
    CONTROL_GRACE_MS,
    DEFAULT_RECEIVE_LIMIT,
    DEFAULT_WAIT_MS,
    EXCHANGE_PREVIEW_CHARS,
    EXCHANGE_WINDOW,
    MAX_AGENT_NAME_CHARS,
    MAX_CURSOR_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_PAGE_TEXT_BYTES,
    MAX_RECEIVE_LIMIT,
    MAX_REQUEST_FRAME_BYTES,
    MAX_REQUEST_ID_CHARS,
    MAX_RESPONSE_FRAME_BYTES,
    MAX_TARGET_CHARS,
    MAX_WAIT_MS,
    PROTOCOL_VERSION,
)
from wardian.usage import AgentUsage, TokenUsage

if TYPE_CHECKING:
    from wardian.approvals import ApprovalTally  # it extends this module (and imports it)
    from wardian.taskpolicy import TaskBounds


class InteractionKind(StrEnum):
    INFORMATION = "information"
    TASK = "task"
    REPLY = "reply"
    NOTICE = "notice"


class ReplyStatus(StrEnum):
    DONE = "done"
    BLOCKED = "blocked"
    FAILED = "failed"


class ClaimKind(StrEnum):
    """Who exposed a task as new work: manual receive or automatic dispatch (they share one claim)."""

    RECEIVE = "receive"
    DISPATCH = "dispatch"
    REPLY = "reply"


class TaskState(StrEnum):
    """Where a task stands. The facts behind it (claimed, submitted, ...) are kept apart in `TaskFacts`."""

    PENDING = "pending"
    CLAIMED = "claimed"
    SUBMITTED = "submitted"
    UNCERTAIN = "uncertain"
    COMPLETED = "completed"


class AgentStatus(StrEnum):
    OFF = "off"
    STARTING = "starting"
    IDLE = "idle"
    ACTIVE = "active"
    ERRORED = "errored"
    SIGNED_OUT = "signed_out"
    """Shown (never stored as the observed state) while the provider has rejected the agent's credentials since its
    last start: `auth login`, then a start, clears it (docs/guide/sign-in.md)."""


PROVIDERS = ("codex", "opencode", "claude", "qwen", "gemini", "pi", "acp")

# Why a wait or a receive with a timeout woke: a record arrived, or context was pushed into the live conversation.
WakeReason = Literal["mailbox_activity", "provider_context_available"]
# Why a wait (`mailbox/wait`) ended before its time: as WakeReason, or the deadlock guard found that no reply could
# ever end it (docs/guide/teams.md).
WaitReason = Literal["mailbox_activity", "provider_context_available", "deadlock"]


def now_ms() -> int:
    """The time as integer Unix milliseconds (every `*_at` field)."""
    return time.time_ns() // 1_000_000

ID_PREFIX = {
    InteractionKind.INFORMATION: "msg",
    InteractionKind.TASK: "ask",
    InteractionKind.REPLY: "rep",
    InteractionKind.NOTICE: "ntc",
}

# The person running the agents (contract rule SES-4): one reserved participant of every home, never an agent. It
# sends information and tasks and receives the replies to its tasks like any participant, only through the control
# socket (whose peer uid check makes the caller the home's owner); no session, target or roster listing ever resolves
# to it, and no agent may take its name.
OPERATOR_NAME = "operator"
OPERATOR_UUID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True, slots=True)
class Agent:
    id: int
    uuid: str
    name: str
    provider: str
    workspace: str | None
    status: AgentStatus
    generation: int
    active_turn_id: str | None
    created_at: int
    host: str | None = None  # the host whose app serves it; None only before any app claimed a host


@dataclass(frozen=True, slots=True)
class HostInfo:
    """One host of the store: the app serving it holds a live lease, renewed by heartbeat
    (docs/guide/several-machines.md#hosts)."""

    name: str
    live: bool
    heartbeat_at: int | None
    started_at: int | None
    pid: int | None
    machine: str | None


@dataclass(frozen=True, slots=True)
class Caller:
    """The managed agent a session token resolved to; the app attributes everything to it."""

    agent: Agent
    session_id: int
    generation: int


class Party(NamedTuple):
    name: str
    uuid: str


class TaskFacts(NamedTuple):
    """The delivery facts of one task, each recorded separately (all times are Unix ms)."""

    state: TaskState
    claimed_by: ClaimKind | None
    claim_generation: int | None
    claimed_at: int | None
    submitted_at: int | None
    thread_id: str | None
    turn_id: str | None
    uncertain_at: int | None
    completed_at: int | None
    reply_status: ReplyStatus | None
    reply_id: str | None
    lookup: Literal["confirmed", "not_found"] | None = None
    """A submission whose answer was lost, settled by looking its message up by the id the app chose
    (docs/decisions/0016-opencode-chosen-message-ids.md): found (the delivery is confirmed) or not found (it stays
    uncertain)."""


class LostTask(NamedTuple):
    """A task a killed app delivered and never saw answered (`uncertain` for that reason, no outcome, no reply):
    its agent and what its binding recorded, for the provider to settle from its own records."""

    request_id: str
    agent_id: int
    thread_id: str | None
    message_id: str | None
    """The provider-facing id of the delivery's message (chosen before sending), else the bound turn id."""


class Interaction(NamedTuple):
    id: str
    kind: InteractionKind
    sender: Party | None  # None: Wardian itself (notices)
    recipient: Party
    text: str
    created_at: int
    request_id: str | None  # tasks: their own ask_ id; replies and notices: the task they answer
    status: ReplyStatus | None  # replies only
    acked: bool


class ReceivedRecord(NamedTuple):
    interaction: Interaction
    new_work: bool  # a task exposed as new work by this very receive (once per task, ever)
    task: TaskFacts | None


@dataclass(frozen=True, slots=True)
class Receipt:
    interaction_id: str
    kind: InteractionKind
    request_id: str | None
    sender: Party
    recipient: Party
    created_at: int
    pushing: bool = False  # admitted for a push into the recipient's live conversation (not yet settled)
    deadline_at: int | None = None  # a task's deadline (Unix ms), when it has one


@dataclass(frozen=True, slots=True)
class ReceivePage:
    records: tuple[ReceivedRecord, ...]
    cursor: str | None  # continue after this page; None when the page is empty
    acked: int  # records newly acknowledged by the ack_cursor of this call
    more: bool  # further unacknowledged records follow this page


@dataclass(frozen=True, slots=True)
class ReplyReceipt:
    reply_id: str
    request_id: str
    status: ReplyStatus
    requester: Party
    created_at: int
    pushing: bool = False  # admitted for a push into the requester's live conversation (not yet settled)


@dataclass(frozen=True, slots=True)
class InterruptReceipt:
    interrupt_id: int
    target: Party
    turn_id: str
    created_at: int


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record as the operator's log shows it: the record, and a task's delivery facts."""

    interaction: Interaction
    task: TaskFacts | None


@dataclass(frozen=True, slots=True)
class ManagedAgent:
    """An agent as the provider runtime manages it: desired state, launch settings, generation, conversation."""

    id: int
    uuid: str
    name: str
    provider: str
    workspace: str | None
    desired: str  # unmanaged | on | off
    mode: str | None
    overrides: tuple[str, ...]
    generation: int
    thread_id: str | None
    previous_thread_id: str | None = None
    """The conversation `thread_id` replaced, when one could not be resumed (its provider no longer had it)."""
    thread_replaced_at: int | None = None
    thread_replaced_reason: str | None = None
    auth: str | None = None
    """The name of the credential (`wardian auth`) its starts use; None: the provider's default credential."""
    approve_tools: tuple[str, ...] = ()
    """The wardian tools its last explicit start granted (`--approve-tools`); an app restart and a relaunch for new
    work grant them again."""
    env: tuple[str, ...] = ()
    """Its `--env NAME=VALUE` settings, kept like its `-c` settings: given to its provider's process."""
    command: tuple[str, ...] = ()
    """The command line of a generic ACP agent (provider `acp`: `opencode acp`), given at `agent add`; () for
    every other provider, whose executable wardian finds itself."""
    approvals: str | None = None
    """Who answers its permission requests (`--approvals`; docs/guide/approvals.md); None: never set (deny)."""
    approval_timeout_ms: int | None = None
    """How long an approval of it waits for an answer (`--approval-timeout`); None: never set (10 minutes)."""
    allow: tuple[str, ...] = ()
    """Its allow rules (`--allow`, kept like `-c`), which allow a matching request without asking
    (docs/guide/approvals.md#allow-rules)."""


@dataclass(frozen=True, slots=True)
class PendingTask:
    """A task waiting for its durable claim (dispatch or receive)."""

    request_id: str
    text: str
    sender: Party
    created_at: int


@dataclass(frozen=True, slots=True)
class Published:
    """A task's completion was published (or found already completed by an explicit reply)."""

    request_id: str
    requester_uuid: str
    record_id: str | None  # the reply or notice written now; None when an explicit reply had completed the task
    pushing: bool = False  # admitted for a push into the requester's live conversation (not yet settled)


@dataclass(frozen=True, slots=True)
class TaskEnd:
    """A task the operator (a person) sent was answered: its reply or Wardian notice (`record_id`, at store order
    `seq`)."""

    seq: int
    request_id: str
    record_id: str
    agent: Party
    """The agent the task was for."""
    status: ReplyStatus
    ended_at: int


@dataclass(frozen=True, slots=True)
class RecordDelivery:
    """How a record reached (or is reaching) its recipient: returned by a receive, or pushed into its live
    conversation; never both (reliability row D12, docs/decisions/0015-one-path-per-record.md). Times are Unix ms."""

    received_at: int | None  # first returned by a receive
    acked_at: int | None
    push_state: str | None  # sending | done | uncertain; None: the receive path
    pushed_at: int | None  # the push settled (done, or uncertain)
    push_note: str | None  # why a push is uncertain


@dataclass(frozen=True, slots=True)
class TaskStory:
    """A task's facts beyond `TaskFacts`, for the operator's whole-story view."""

    facts: TaskFacts
    requester: Party
    uncertain_reason: str | None
    provider_message_id: str | None
    outcome_status: ReplyStatus | None  # terminal evidence captured from the provider turn
    outcome_at: int | None
    lookup_note: str | None = None  # why the provider's answer was lost, when a lookup then found the message
    rejections: int = 0  # submissions the provider definitely refused (nothing accepted; offered again each time)
    rejection_note: str | None = None  # the provider's words for the last of them
    usage: TokenUsage | None = None  # the tokens of the turn that answered it (None: unknown, or not yet)
    bounds: TaskBounds | None = None  # its deadline and its place in its chain


@dataclass(frozen=True, slots=True)
class DeliveryDoubts:
    """Of the tasks one agent was given: how many deliveries are uncertain, and how many were confirmed only by
    looking their message up after the provider's answer was lost
    (docs/decisions/0016-opencode-chosen-message-ids.md)."""

    uncertain: int
    confirmed_by_lookup: int


@dataclass(frozen=True, slots=True)
class RecordStory:
    """Every fact the app holds about one record (`wardian message show ID`): the record, how it travelled, and for a
    task (or the reply or notice that answers one) the task's story and its answer."""

    interaction: Interaction
    delivery: RecordDelivery
    task: TaskStory | None
    answer: Interaction | None  # a task's reply or notice, once written


class PermissionOption(NamedTuple):
    """One answer an agent offered for a permission request (ACP's `PermissionOption`)."""

    option_id: str
    name: str
    kind: str
    """allow_once, allow_always, reject_once, reject_always, or another the agent names."""


@dataclass(frozen=True, slots=True)
class AgentOverview:
    """An agent as the console's agents page shows it: the agent and its open tasks (docs/guide/console.md#pages)."""

    agent: Agent
    pending: int  # admitted, not yet claimed by a receive or a dispatch
    in_flight: int  # claimed or submitted, not yet completed
    approvals: ApprovalTally | None = None  # its approvals (docs/guide/approvals.md; None: none)
    usage: AgentUsage | None = None  # its ended turns' token usage (None: no turn of it has ended)


@dataclass(frozen=True, slots=True)
class ExchangeRecord:
    """One record of the console's exchange timeline: its place in the store's order (`seq`, newest highest), the record
    with its text cut to a preview, how it travelled, and a task's facts."""

    seq: int
    interaction: Interaction  # `text` is a preview of at most EXCHANGE_PREVIEW_CHARS characters
    text_chars: int  # the whole text's length in characters
    delivery: RecordDelivery
    task: TaskFacts | None
    uncertain_reason: str | None  # why a task's delivery is uncertain


@dataclass(frozen=True, slots=True)
class ExchangePage:
    """A page of the exchange timeline, newest first; `older` is the `before` of the next page (None: no more).
    `searched_to` (participant filters): the page holds every match down to this seq, and its search window ended
    there before the page was full; older matches may follow on the next page."""

    records: tuple[ExchangeRecord, ...]
    older: int | None
    searched_to: int | None = None


@dataclass(frozen=True, slots=True)
class InterruptFact:
    """An interrupt recorded against one turn: who asked, whose turn, when."""

    interrupt_id: int
    caller: Party
    target: Party
    turn_id: str
    created_at: int


@dataclass(frozen=True, slots=True)
class RequestTrace:
    """Everything the console's request view draws for one record: its story, its answer's story (how the reply
    or notice reached the requester), the interrupts recorded against the task's turn, and every task that turn
    carried."""

    story: RecordStory
    answer: RecordStory | None
    interrupts: tuple[InterruptFact, ...]
    turn_tasks: tuple[str, ...]

