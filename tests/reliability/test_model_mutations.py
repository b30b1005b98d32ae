"""Model-based tests (docs/reliability.md row P1: the mutation gate, P1 at the nightly size).

The gate: the P1 state machine (tests/store/test_mailbox_machine.py) must catch each seeded bug within 150
examples. A mutant replaces one of the store operations the machine drives (`StoreOps`) with one that breaks one
rule; core is never edited.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import pytest
from hypothesis import Phase, settings
from hypothesis.internal.observability import with_observability_callback
from hypothesis.stateful import run_state_machine_as_test

from tests.conftest import ALL_HEALTH_CHECKS
from tests.reliability.world import report
from tests.store.test_mailbox_machine import MailboxMachine, StoreOps
from wardian.model import Caller, ClaimKind, ReceivedRecord, ReceivePage, ReplyReceipt, ReplyStatus
from wardian.store import Store, history, ledger, mailbox, roster
from wardian.store import testing as store_testing
from wardian.store.api import Pushable
from wardian.store.tokens import CursorCodec


class DispatchIgnoresClaim(StoreOps):
    """Dispatch takes a task whoever holds its claim."""

    @staticmethod
    def claim_task(store: Store, request_id: str, by: ClaimKind, generation: int,
                   provider_message_id: str | None = None, thread_id: str | None = None) -> bool:
        ledger.claim_task(store, request_id, by, generation, provider_message_id, thread_id)
        return True


class ReplySkipsRecipientCheck(StoreOps):
    """Anyone may reply to a task (the reply is filed as if its recipient wrote it)."""

    @staticmethod
    def reply(store: Store, caller: Caller, request_id: str, status: ReplyStatus, text: str,
              push: Pushable | None = None) -> ReplyReceipt:
        rows = store_testing.execute(store, "SELECT recipient_id FROM tasks WHERE request_id = ?", (request_id,))
        if rows:
            caller = dataclasses.replace(caller, agent=roster.agent(store, rows[0][0]))
        return ledger.reply(store, caller, request_id, status, text, push)


class _AckPastTheCursorCodec(CursorCodec):
    def decode(self, cursor: str, recipient_id: int, field: str) -> tuple[int, int]:
        start, end = super().decode(cursor, recipient_id, field)
        return (start, end + 1_000_000) if field == "ack_cursor" else (start, end)


class AckPastTheCursor(StoreOps):
    """An ack_cursor acknowledges everything after its batch too."""

    @staticmethod
    def prepare(store: Store) -> None:
        store.cursors = _AckPastTheCursorCodec(store.epoch, store.backend.cursor_key)


class ReceiveLeaksAnotherRecipientsRecord(StoreOps):
    """A page also carries one unacknowledged record addressed to someone else."""

    @staticmethod
    def receive(store: Store, caller: Caller, *, cursor: str | None, ack_cursor: str | None,
                limit: int) -> ReceivePage:
        page = mailbox.receive(store, caller, cursor=cursor, ack_cursor=ack_cursor, limit=limit)
        foreign = [r.interaction for r in history.log_records(store, 100_000)
                   if not r.interaction.acked and r.interaction.recipient.uuid != caller.agent.uuid]
        if not foreign:
            return page
        leaked = ReceivedRecord(interaction=foreign[0], new_work=False, task=None)
        return dataclasses.replace(page, records=(*page.records, leaked))


MUTANTS: list[type[StoreOps]] = [DispatchIgnoresClaim, ReplySkipsRecipientCheck, AckPastTheCursor,
                                 ReceiveLeaksAnotherRecipientsRecord]
GATE_EXAMPLES = 150


class _CountedMachine(MailboxMachine):
    """A machine that counts the examples it ran (each subclass its own count)."""

    examples: ClassVar[int] = 0


def machine_on(ops: type[StoreOps]) -> type[_CountedMachine]:
    class Mutated(_CountedMachine):
        examples: ClassVar[int] = 0

        def __init__(self) -> None:
            super().__init__()
            type(self).examples += 1

    Mutated.ops = ops
    Mutated.__name__ = f"MailboxMachineOn{ops.__name__}"
    return Mutated


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.__name__ for m in MUTANTS])
def test_the_mailbox_model_catches_each_seeded_bug_within_150_examples(mutant: type[StoreOps]) -> None:
    """P1 mutation gate: each seeded bug (dispatch ignores the claim; reply skips the
    recipient check; ack acks past the cursor; receive returns another recipient's record) fails the model
    test within 150 examples of 40 steps."""
    machine = machine_on(mutant)
    statuses: list[str] = []

    def observe(observation: Any) -> None:
        if observation.type == "test_case":
            statuses.append(observation.status)

    with pytest.raises(AssertionError), with_observability_callback(observe):
        run_state_machine_as_test(machine, settings=settings(
            max_examples=GATE_EXAMPLES, stateful_step_count=40, deadline=None, database=None, derandomize=True,
            phases=(Phase.generate,), suppress_health_check=ALL_HEALTH_CHECKS))
    # An example is a test case Hypothesis ran to its end: the ones it gave up on (a draw from an empty bundle, an
    # overrun) are not examples, though each built a machine. The gate counts the examples up to the first failure.
    examples = statuses.index("failed") + 1 - statuses[: statuses.index("failed")].count("gave_up")
    report(f"P1 mutation gate {mutant.__name__}", rounds=examples, caught=True)
    assert examples <= GATE_EXAMPLES


def test_the_unmutated_store_passes_the_same_gate_settings() -> None:
    """The gate's control: the real store survives the very settings that catch every mutant."""
    run_state_machine_as_test(machine_on(StoreOps), settings=settings(
        max_examples=30, stateful_step_count=40, deadline=None, database=None, phases=(Phase.generate,),
        suppress_health_check=ALL_HEALTH_CHECKS))


@pytest.mark.slow
def test_p1_at_the_nightly_size() -> None:
    """P1 [NIGHTLY]: 2,000 examples of 60 steps, no counterexample."""
    machine: Any = machine_on(StoreOps)
    run_state_machine_as_test(machine, settings=settings(
        max_examples=2000, stateful_step_count=60, deadline=None, database=None,
        suppress_health_check=ALL_HEALTH_CHECKS))
    report("P1 mailbox model", rounds=machine.examples)
