"""The parts of the store seam (`wardian.store.api.Store`): what each part of a store does, on every backend.

A store holds one of each (`store.roster`, `store.mailbox`, `store.history`, `store.ledger`, and `store.leases` for
the hosts) and answers every part's operations itself too, so an operation of the app's writer is still
`Callable[[Store], T]`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from wardian.model import (
    Agent,
    AgentOverview,
    AgentStatus,
    Caller,
    ClaimKind,
    DeliveryDoubts,
    ExchangePage,
    HostInfo,
    Interaction,
    InteractionKind,
    InterruptReceipt,
    LogRecord,
    LostTask,
    ManagedAgent,
    PendingTask,
    Published,
    Receipt,
    ReceivePage,
    RecordStory,
    ReplyReceipt,
    ReplyStatus,
    RequestTrace,
    TaskFacts,
)

__all__ = ["History", "Hosts", "LostTasks", "Mailbox", "Pushable", "Roster", "SessionKind", "TaskLedger"]

# Whether a record for this recipient (an agent's UUID) is admitted for a push into its live conversation.
Pushable = Callable[[str], bool]
# operator: minted by `wardian agent env` (valid until revoked); managed: minted by a start for its generation.
SessionKind = Literal["operator", "managed"]


class Roster(Protocol):
    """Agents, their observed runtime state and their sessions."""

    def add_agent(self, name: str, provider: str, workspace: str | None) -> Agent: ...

    def agent(self, agent_id: int) -> Agent:
        """Raises: UnknownAgent."""
        ...

    def list_agents(self) -> list[Agent]:
        """Every agent not removed, by name (never the operator)."""
        ...

    def agents_overview(self) -> list[AgentOverview]:
        """`list_agents` with each agent's pending and in-flight task counts (the console's agents page)."""
        ...

    def operator(self) -> Caller:
        """The operator as a caller: the reserved participant the control socket's owner acts as."""
        ...

    def find_agents(self, name_or_uuid: str) -> list[Agent]:
        """Agents whose UUID (exact, canonical lowercase) or name (exact) is `name_or_uuid`."""
        ...

    def resolve_agent(self, name_or_uuid: str) -> Agent:
        """The one agent an operator names. Raises: UnknownAgent, AmbiguousTarget."""
        ...

    def resolve_target(self, caller: Caller, target: str) -> Agent:
        """The exact recipient of a caller's record. Raises: UnknownTarget, AmbiguousTarget, InvalidTarget."""
        ...

    def create_session(self, agent_id: int, kind: SessionKind = "operator") -> str:
        """A new session token for the agent's current generation; only its hash is kept. `managed`: minted by a start
        for its generation (stale once a newer generation starts); `operator`: valid until revoked."""
        ...

    def authenticate(self, token: str) -> Caller:
        """Raises: UnknownSession, SessionHomeMismatch, Unauthenticated, StaleSession."""
        ...

    def revoke_sessions(self, agent_id: int, *, managed_too: bool) -> int:
        """Revoke the agent's operator-minted sessions (and its managed ones with `managed_too`); how many."""
        ...

    def remove_agent(self, agent_id: int) -> Agent:
        """Take the agent off the roster (records stay): name freed, sessions revoked. Raises: UnknownAgent."""
        ...

    def managed_agent(self, agent_id: int) -> ManagedAgent: ...

    def managed_agents(self) -> list[ManagedAgent]:
        """Every agent not removed, as the runtime manages it (saved mode and settings, conversation), by id."""
        ...

    def agents_desired_on(self) -> list[int]: ...

    def set_desired(self, agent_id: int, desired: str, mode: str | None = None,
                    overrides: Sequence[str] | None = None, approve_tools: Sequence[str] | None = None) -> None: ...

    def begin_generation(self, agent_id: int) -> int:
        """A new runtime generation for the agent (a new owner); returns its number."""
        ...

    def observe(self, agent_id: int, generation: int, status: AgentStatus, thread_id: str | None = None,
                active_turn_id: str | None = None) -> None:
        """Record the observed runtime state, unless a newer generation already owns the agent."""
        ...

    def replace_thread(self, agent_id: int, generation: int, previous: str, current: str, reason: str) -> bool:
        """Record that conversation `current` replaced `previous`, which could not be resumed (`reason`), unless a
        newer generation owns the agent; True when recorded."""
        ...

    def reset_observed_state(self) -> None:
        """At app startup no owner runs yet: every agent is observed off, with no active turn."""
        ...

    def set_auth(self, agent_id: int, auth: str | None) -> None: ...

    def mark_signed_out(self, agent_id: int, generation: int, reason: str) -> bool: ...

    def mark_errored(self, agent_id: int) -> None: ...


class Mailbox(Protocol):
    """Records and their recipients' reading positions."""

    def admit(self, caller: Caller, recipient: Agent, kind: InteractionKind, text: str, *,
              push: bool = False) -> Receipt:
        """Commit one information or task record from `caller` to `recipient` (admission). `push` (information
        only): admitted for a push into the recipient's live conversation, hidden from receive until the push
        settles (`push_done`, `push_released`, `push_uncertain`)."""
        ...

    def has_unacked(self, agent_id: int) -> bool: ...

    def receive(self, caller: Caller, *, cursor: str | None, ack_cursor: str | None, limit: int) -> ReceivePage:
        """Acknowledge `ack_cursor`'s batch, then return the next page; tasks in it nobody claimed are claimed
        (by receive) and marked new work. Raises: InvalidCursor, StaleCursor."""
        ...

    def record_interrupt(self, caller: Caller, target: Agent) -> InterruptReceipt:
        """Raises: NotActive (nothing recorded)."""
        ...

    def claim_push(self, public_id: str) -> bool:
        """Take a record on the receive path that no receive returned for a push now; True when the push owns it."""
        ...

    def push_done(self, public_id: str) -> None:
        """The push of this record was acknowledged: it is in its recipient's live conversation."""
        ...

    def push_released(self, public_id: str) -> None:
        """The push certainly did not happen (nothing was sent): the record goes to the receive path."""
        ...

    def push_uncertain(self, public_id: str, reason: str) -> None:
        """The push may have happened: the record stays off the receive path (never shown twice), with why."""
        ...

    def pushes_interrupted(self, reason: str) -> list[str]:
        """At startup: pushes still `sending` may have left; they become uncertain. Their ids."""
        ...

    def take_unseen_context(self, agent_id: int) -> bool:
        """True (once) when context was pushed into the agent's conversation since its waits last reported it."""
        ...


class History(Protocol):
    """The operator's read models of the mailbox: a record, its story and trace, the exchange timeline, the log."""

    def interaction(self, public_id: str) -> Interaction:
        """Raises: UnknownRequest."""
        ...

    def record_story(self, public_id: str) -> RecordStory:
        """Every fact about one record (`wardian message show`). Raises: UnknownRequest."""
        ...

    def request_trace(self, public_id: str) -> RequestTrace:
        """A record's story for the request view: a reply or notice gives its task's. Raises: UnknownRequest."""
        ...

    def exchange(self, *, participant: int | None, kind: InteractionKind | None, uncertain: bool,
                 before: int | None, limit: int) -> ExchangePage:
        """A page of every record, newest first, older than `before` (a record's `seq`): those to or from
        `participant` (an agent's or the operator's id), of `kind`, or uncertain (a task's delivery or a push)."""
        ...

    def log_records(self, *, limit: int) -> list[LogRecord]:
        """Every record, oldest first, acknowledged or not, with its task facts (operator views, evidence)."""
        ...


class TaskLedger(Protocol):
    """A task's lifecycle: claim, release, bind, uncertain, capture, complete (see `wardian.store.ledger`)."""

    def task(self, request_id: str) -> TaskFacts:
        """Raises: UnknownRequest."""
        ...

    def pending_tasks(self, agent_id: int, limit: int = 50) -> list[PendingTask]: ...

    def claim_task(self, request_id: str, by: ClaimKind, generation: int, *, provider_message_id: str | None = None,
                   thread_id: str | None = None) -> bool:
        """Take the one durable claim of a pending task; True only for the single winner. A dispatch claim of a
        provider that lets the client choose its message id persists that id (and the conversation) with the claim,
        so the ask_ <-> message binding is durable before a byte of the submission leaves."""
        ...

    def release_claim(self, request_id: str, generation: int, *, rejection: str | None = None) -> bool:
        """Give a dispatch claim of this generation back (a confirmed rejection, or nothing was sent); `rejection`:
        the provider definitely refused the submission, in these words (counted and kept with the task)."""
        ...

    def bind_submission(self, request_id: str, generation: int, thread_id: str, turn_id: str, *,
                        lookup: str | None = None) -> bool:
        """Persist the request/claim/generation/thread/turn binding of an accepted submission; `lookup`: why the
        provider's answer was lost when a lookup then found the message (recorded as confirmed by lookup)."""
        ...

    def mark_uncertain(self, request_id: str, reason: str, *, looked_up: bool = False) -> None:
        """The submission's outcome is unknown (`looked_up`: a lookup of its message found nothing)."""
        ...

    def delivery_doubts(self) -> dict[int, DeliveryDoubts]:
        """By agent id, for agents with any: their tasks' uncertain deliveries and those confirmed by lookup."""
        ...

    def tasks_of_turn(self, turn_id: str) -> list[str]: ...

    def capture_outcome(self, request_id: str, status: ReplyStatus, text: str) -> bool:
        """Persist the terminal evidence of a task's turn (once); publication comes after."""
        ...

    def publish_outcome(self, request_id: str, push: Pushable | None = None) -> Published | None:
        """Publish a captured outcome as the task's reply (`done`) or Wardian notice, unless an explicit reply
        already completed it. None when nothing is captured."""
        ...

    def reply(self, caller: Caller, request_id: str, status: ReplyStatus, text: str,
              push: Pushable | None = None) -> ReplyReceipt:
        """An explicit reply by the task's assigned recipient, once.
        Raises: UnknownRequest, NotATask, NotRecipient, AlreadyCompleted."""
        ...

    def fail_task(self, request_id: str, generation: int, text: str, push: Pushable | None = None) -> Published | None:
        """A definite failure before submission: claim the pending task and answer it with one correlated
        `failed` notice, all in one transaction. None when the task was no longer pending."""
        ...

    def answer_open_tasks(self, recipient_id: int, text: str, uncertain_reason: str,
                          push: Pushable | None = None) -> tuple[list[Published], list[str]]:
        """Each task of the recipient still pending or claimed (by receive) gets one correlated `failed` notice
        (`text`); one submitted, or claimed by a dispatch that may have submitted it, becomes uncertain
        (`uncertain_reason`). The notices, and the request ids made uncertain."""
        ...

    def unpublished_outcomes(self) -> list[str]: ...

    def mark_lost_bindings_uncertain(self, reason: str) -> list[str]:
        """At startup: dispatched tasks whose turn was never observed to end become uncertain."""
        ...

    def mark_generation_lost(self, agent_id: int, generation: int, reason: str) -> list[str]:
        """An owner ended: its submissions whose turn was never observed to end become uncertain."""
        ...


class Hosts(Protocol):
    """Which app serves which part of the roster (`wardian.store.hosts`)."""

    @property
    def host(self) -> str | None:
        """The host this store session serves, once claimed."""
        ...

    def claim_host(
        self, name: str, owner: str, ttl_ms: int, *, pid: int, machine: str, home: str, force: bool = False
    ) -> None:
        """Take the lease of host `name`. Raises: AlreadyRunning (a live app from elsewhere holds it)."""
        ...

    def renew_host(self, ttl_ms: int) -> bool:
        """Extend this app's lease; False when another app took the host."""
        ...

    def release_host(self) -> None: ...

    def hosts(self) -> list[HostInfo]: ...


class LostTasks(Protocol):
    """The deliveries a killed app lost, read back at the next start (`wardian.store.lost`)."""

    def restart_lost_tasks(self, reason: str) -> list[LostTask]:
        """This host's tasks `mark_lost_bindings_uncertain(reason)` left uncertain that have neither an outcome nor
        a reply yet, oldest first (an index of uncertain tasks bounds the read, never a scan of all tasks)."""
        ...

    def restate_uncertain(self, request_id: str, reason: str, *, looked_up: bool = False) -> bool:
        """Say why an uncertain task (no outcome, no reply) stays uncertain once its provider's records were read;
        `looked_up`: the message was looked for and not found. It stays uncertain either way."""
        ...
