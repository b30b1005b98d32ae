"""A store made of parts: the roster, mailbox, history, ledger and hosts parts over one transaction engine.

`SqlStore` holds the parts (`roster`, `mailbox`, `history`, `ledger`, `leases`) and answers each part's operations
itself by handing them to the part, so the app's writer still runs plain functions of a store and a
backend is only its engine (`wardian.store.engine`) and how it opens and closes.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from wardian.model import (
    EXCHANGE_WINDOW,
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
from wardian.store import lost
from wardian.store.api import BatchResult, Call, WaitReader
from wardian.store.contracts import Pushable, SessionKind
from wardian.store.cursors import CursorCodec
from wardian.store.engine import Engine
from wardian.store.history import SqlHistory
from wardian.store.hosts import SqlHosts
from wardian.store.ledger import SqlLedger
from wardian.store.mailbox import SqlMailbox
from wardian.store.roster import SqlRoster


class SqlStore:
    """One store over one engine (implements `wardian.store.api.Store`); a backend subclasses it to open and close."""

    inline_statements: bool

    def __init__(self, engine: Engine, epoch: bytes, cursor_key: bytes) -> None:
        self._engine = engine
        self.epoch = epoch
        self.cursors = CursorCodec(epoch, cursor_key)
        self.roster = SqlRoster(engine, self.home_tag)
        self.ledger = SqlLedger(engine)
        self.mailbox = SqlMailbox(engine, self.ledger, self)
        self.history = SqlHistory(engine)
        self.leases = SqlHosts(engine)

    @property
    def home_tag(self) -> str:
        """A short public tag of this store, embedded in session tokens to spot another home's token."""
        return self.epoch.hex()[:8]

    def close(self) -> None:
        raise NotImplementedError  # the backend's

    def wait_reader(self) -> WaitReader | None:
        return None  # a backend with a faster look for waits than its writer's provides one

    def integrity_check(self) -> str:
        raise NotImplementedError  # the backend's

    # --- transactions ---------------------------------------------------------------------------------

    def atomic(self) -> AbstractContextManager[None]:
        """One transaction or, nested, one savepoint."""
        return self._engine.atomic()

    def begin_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None = None) -> list[BatchResult]:
        return self._engine.begin_batch(calls, bare, self)

    @property
    def batch_wrote(self) -> bool:
        return self._engine.batch_wrote

    def commit_batch(self, results: list[BatchResult]) -> list[BatchResult]:
        return self._engine.commit_batch(results)

    def run_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None = None) -> list[BatchResult]:
        """Run `calls` in one transaction (group commit): each in its own savepoint, one COMMIT for all. If the COMMIT
        itself fails, every operation of the batch fails with that storage error."""
        return self.commit_batch(self.begin_batch(calls, bare))

    # --- cursors: the one seam every receive checks its cursors through --------------------------------

    def encode_cursor(self, recipient_id: int, start: int, end: int) -> str:
        return self.cursors.encode(recipient_id, start, end)

    def decode_cursor(self, cursor: str, recipient_id: int, field: str) -> tuple[int, int]:
        return self.cursors.decode(cursor, recipient_id, field)

    # --- hosts ----------------------------------------------------------------------------------------

    @property
    def host(self) -> str | None:
        return self.leases.host

    def claim_host(
        self, name: str, owner: str, ttl_ms: int, *, pid: int, machine: str, home: str, force: bool = False
    ) -> None:
        self.leases.claim_host(name, owner, ttl_ms, pid=pid, machine=machine, home=home, force=force)

    def renew_host(self, ttl_ms: int) -> bool:
        return self.leases.renew_host(ttl_ms)

    def release_host(self) -> None:
        self.leases.release_host()

    def hosts(self) -> list[HostInfo]:
        return self.leases.hosts()

    # --- roster ---------------------------------------------------------------------------------------

    def add_agent(self, name: str, provider: str, workspace: str | None) -> Agent:
        return self.roster.add_agent(name, provider, workspace)

    def agent(self, agent_id: int) -> Agent:
        return self.roster.agent(agent_id)

    def list_agents(self) -> list[Agent]:
        return self.roster.list_agents()

    def agents_overview(self) -> list[AgentOverview]:
        return self.roster.agents_overview()

    def operator(self) -> Caller:
        return self.roster.operator()

    def find_agents(self, name_or_uuid: str) -> list[Agent]:
        return self.roster.find_agents(name_or_uuid)

    def resolve_agent(self, name_or_uuid: str) -> Agent:
        return self.roster.resolve_agent(name_or_uuid)

    def resolve_target(self, caller: Caller, target: str) -> Agent:
        return self.roster.resolve_target(caller, target)

    def create_session(self, agent_id: int, kind: SessionKind = "operator") -> str:
        return self.roster.create_session(agent_id, kind)

    def authenticate(self, token: str) -> Caller:
        return self.roster.authenticate(token)

    def revoke_sessions(self, agent_id: int, *, managed_too: bool) -> int:
        return self.roster.revoke_sessions(agent_id, managed_too=managed_too)

    def remove_agent(self, agent_id: int) -> Agent:
        return self.roster.remove_agent(agent_id)

    def managed_agent(self, agent_id: int) -> ManagedAgent:
        return self.roster.managed_agent(agent_id)

    def managed_agents(self) -> list[ManagedAgent]:
        return self.roster.managed_agents()

    def agents_desired_on(self) -> list[int]:
        return self.roster.agents_desired_on()

    def set_desired(self, agent_id: int, desired: str, mode: str | None = None,
                    overrides: Sequence[str] | None = None, approve_tools: Sequence[str] | None = None) -> None:
        self.roster.set_desired(agent_id, desired, mode, overrides, approve_tools)

    def begin_generation(self, agent_id: int) -> int:
        return self.roster.begin_generation(agent_id)

    def observe(self, agent_id: int, generation: int, status: AgentStatus, thread_id: str | None = None,
                active_turn_id: str | None = None) -> None:
        self.roster.observe(agent_id, generation, status, thread_id, active_turn_id)

    def replace_thread(self, agent_id: int, generation: int, previous: str, current: str, reason: str) -> bool:
        return self.roster.replace_thread(agent_id, generation, previous, current, reason)

    def reset_observed_state(self) -> None:
        self.roster.reset_observed_state()

    def set_auth(self, agent_id: int, auth: str | None) -> None:
        self.roster.set_auth(agent_id, auth)

    def mark_signed_out(self, agent_id: int, generation: int, reason: str) -> bool:
        return self.roster.mark_signed_out(agent_id, generation, reason)

    def mark_errored(self, agent_id: int) -> None:
        self.roster.mark_errored(agent_id)

    # --- mailbox --------------------------------------------------------------------------------------

    def admit(self, caller: Caller, recipient: Agent, kind: InteractionKind, text: str, *,
              push: bool = False) -> Receipt:
        return self.mailbox.admit(caller, recipient, kind, text, push=push)

    def has_unacked(self, agent_id: int) -> bool:
        return self.mailbox.has_unacked(agent_id)

    def receive(self, caller: Caller, *, cursor: str | None, ack_cursor: str | None, limit: int) -> ReceivePage:
        return self.mailbox.receive(caller, cursor=cursor, ack_cursor=ack_cursor, limit=limit)

    def record_interrupt(self, caller: Caller, target: Agent) -> InterruptReceipt:
        return self.mailbox.record_interrupt(caller, target)

    def claim_push(self, public_id: str) -> bool:
        return self.mailbox.claim_push(public_id)

    def push_done(self, public_id: str) -> None:
        self.mailbox.push_done(public_id)

    def push_released(self, public_id: str) -> None:
        self.mailbox.push_released(public_id)

    def push_uncertain(self, public_id: str, reason: str) -> None:
        self.mailbox.push_uncertain(public_id, reason)

    def pushes_interrupted(self, reason: str) -> list[str]:
        return self.mailbox.pushes_interrupted(reason)

    def take_unseen_context(self, agent_id: int) -> bool:
        return self.mailbox.take_unseen_context(agent_id)

    # --- history --------------------------------------------------------------------------------------

    def interaction(self, public_id: str) -> Interaction:
        return self.history.interaction(public_id)

    def record_story(self, public_id: str) -> RecordStory:
        return self.history.record_story(public_id)

    def request_trace(self, public_id: str) -> RequestTrace:
        return self.history.request_trace(public_id)

    def exchange(self, *, participant: int | None, kind: InteractionKind | None, uncertain: bool,
                 before: int | None, limit: int, window: int = EXCHANGE_WINDOW) -> ExchangePage:
        return self.history.exchange(participant=participant, kind=kind, uncertain=uncertain, before=before,
                                     limit=limit, window=window)

    def log_records(self, *, limit: int) -> list[LogRecord]:
        return self.history.log_records(limit=limit)

    # --- task ledger ----------------------------------------------------------------------------------

    def task(self, request_id: str) -> TaskFacts:
        return self.ledger.task(request_id)

    def pending_tasks(self, agent_id: int, limit: int = 50) -> list[PendingTask]:
        return self.ledger.pending_tasks(agent_id, limit)

    def claim_task(self, request_id: str, by: ClaimKind, generation: int, *, provider_message_id: str | None = None,
                   thread_id: str | None = None) -> bool:
        return self.ledger.claim_task(request_id, by, generation, provider_message_id=provider_message_id,
                                      thread_id=thread_id)

    def release_claim(self, request_id: str, generation: int, *, rejection: str | None = None) -> bool:
        return self.ledger.release_claim(request_id, generation, rejection=rejection)

    def bind_submission(self, request_id: str, generation: int, thread_id: str, turn_id: str, *,
                        lookup: str | None = None) -> bool:
        return self.ledger.bind_submission(request_id, generation, thread_id, turn_id, lookup=lookup)

    def mark_uncertain(self, request_id: str, reason: str, *, looked_up: bool = False) -> None:
        self.ledger.mark_uncertain(request_id, reason, looked_up=looked_up)

    def delivery_doubts(self) -> dict[int, DeliveryDoubts]:
        return self.ledger.delivery_doubts()

    def tasks_of_turn(self, turn_id: str) -> list[str]:
        return self.ledger.tasks_of_turn(turn_id)

    def capture_outcome(self, request_id: str, status: ReplyStatus, text: str) -> bool:
        return self.ledger.capture_outcome(request_id, status, text)

    def publish_outcome(self, request_id: str, push: Pushable | None = None) -> Published | None:
        return self.ledger.publish_outcome(request_id, push)

    def reply(self, caller: Caller, request_id: str, status: ReplyStatus, text: str,
              push: Pushable | None = None) -> ReplyReceipt:
        return self.ledger.reply(caller, request_id, status, text, push)

    def fail_task(self, request_id: str, generation: int, text: str, push: Pushable | None = None) -> Published | None:
        return self.ledger.fail_task(request_id, generation, text, push)

    def answer_open_tasks(self, recipient_id: int, text: str, uncertain_reason: str,
                          push: Pushable | None = None) -> tuple[list[Published], list[str]]:
        return self.ledger.answer_open_tasks(recipient_id, text, uncertain_reason, push)

    def unpublished_outcomes(self) -> list[str]:
        return self.ledger.unpublished_outcomes()

    def mark_lost_bindings_uncertain(self, reason: str) -> list[str]:
        return self.ledger.mark_lost_bindings_uncertain(reason)

    def restart_lost_tasks(self, reason: str) -> list[LostTask]:
        return lost.restart_lost_tasks(self._engine, reason)

    def restate_uncertain(self, request_id: str, reason: str, *, looked_up: bool = False) -> bool:
        return lost.restate_uncertain(self._engine, request_id, reason, looked_up=looked_up)

    def mark_generation_lost(self, agent_id: int, generation: int, reason: str) -> list[str]:
        return self.ledger.mark_generation_lost(agent_id, generation, reason)
