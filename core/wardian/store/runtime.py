"""Store operations of the provider runtime: managed agents, dispatch claims, bindings and outcomes.

Invariants (seed: "Automatic task delivery"):
- A dispatch claim is taken before anything is sent; it is released only on a recognised stale-turn
  rejection or when nothing was sent (the claim's generation must still match).
- The request/claim/generation/thread/turn binding is persisted before any completion is published.
- Terminal evidence (`outcome_*`) is captured before the reply is published, in its own transaction, so a
  crash between the two is recovered by publishing the captured outcome, never by rerunning the turn.
- An uncertain delivery stays uncertain: nothing here moves a task out of `uncertain` except a reply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from wardian.model import MAX_MESSAGE_BYTES, AgentStatus, Interaction, InteractionKind, Party, ReplyStatus
from wardian.store.store import InteractionStore, new_public_id, now_ms


@dataclass(frozen=True, slots=True)
class ManagedAgent:
    id: int
    uuid: str
    name: str
    workspace: str | None
    desired: str
    mode: str | None
    overrides: tuple[str, ...]
    generation: int
    thread_id: str | None


@dataclass(frozen=True, slots=True)
class PendingTask:
    request_id: str
    text: str
    sender: Party
    created_at: int


@dataclass(frozen=True, slots=True)
class Published:
    request_id: str
    requester_uuid: str
    record_id: str | None  # None when an explicit reply had already completed the task


def managed_agent(store: InteractionStore, agent_id: int) -> ManagedAgent:
    with store.atomic() as conn:
        r = conn.execute("SELECT id, uuid, name, workspace, desired, mode, overrides, generation, thread_id "
                         "FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return ManagedAgent(id=r[0], uuid=r[1], name=r[2], workspace=r[3], desired=r[4], mode=r[5],
                        overrides=tuple(json.loads(r[6])) if r[6] else (), generation=r[7], thread_id=r[8])


def agents_desired_on(store: InteractionStore) -> list[int]:
    with store.atomic() as conn:
        return [r[0] for r in conn.execute(
            "SELECT id FROM agents WHERE desired = 'on' AND removed_at IS NULL ORDER BY id")]


def set_desired(store: InteractionStore, agent_id: int, desired: str, mode: str | None = None,
                overrides: Sequence[str] | None = None) -> None:
    with store.atomic() as conn:
        if overrides is None:
            conn.execute("UPDATE agents SET desired = ? WHERE id = ?", (desired, agent_id))
        else:
            conn.execute("UPDATE agents SET desired = ?, mode = ?, overrides = ? WHERE id = ?",
                         (desired, mode, json.dumps(list(overrides)), agent_id))


def begin_generation(store: InteractionStore, agent_id: int) -> int:
    """A new runtime generation for the agent (a new owner): returns its number."""
    with store.atomic() as conn:
        conn.execute("UPDATE agents SET generation = generation + 1, status = 'starting', active_turn_id = NULL "
                     "WHERE id = ?", (agent_id,))
        return int(conn.execute("SELECT generation FROM agents WHERE id = ?", (agent_id,)).fetchone()[0])


def observe(store: InteractionStore, agent_id: int, generation: int, status: AgentStatus,
            thread_id: str | None = None, active_turn_id: str | None = None) -> None:
    """Record the observed runtime state, unless a newer generation already owns the agent."""
    with store.atomic() as conn:
        conn.execute(
            "UPDATE agents SET status = ?, active_turn_id = ?, thread_id = COALESCE(?, thread_id) "
            "WHERE id = ? AND generation = ?",
            (status.value, active_turn_id, thread_id, agent_id, generation))


def reset_observed_state(store: InteractionStore) -> None:
    """At app startup no owner runs yet: every agent is observed off, with no active turn."""
    with store.atomic() as conn:
        conn.execute("UPDATE agents SET status = 'off', active_turn_id = NULL WHERE status != 'off' "
                     "OR active_turn_id IS NOT NULL")


def mark_errored(store: InteractionStore, agent_id: int) -> None:
    with store.atomic() as conn:
        conn.execute("UPDATE agents SET status = 'errored', active_turn_id = NULL WHERE id = ?", (agent_id,))


def pending_tasks(store: InteractionStore, agent_id: int, limit: int = 50) -> list[PendingTask]:
    with store.atomic() as conn:
        rows = conn.execute(
            "SELECT t.request_id, i.body, a.name, a.uuid, i.created_at FROM tasks t "
            "JOIN interactions i ON i.id = t.interaction_id JOIN agents a ON a.id = t.requester_id "
            "WHERE t.recipient_id = ? AND t.state = 'pending' ORDER BY t.interaction_id LIMIT ?",
            (agent_id, limit)).fetchall()
    return [PendingTask(r[0], r[1], Party(r[2], r[3]), r[4]) for r in rows]


def release_claim(store: InteractionStore, request_id: str, generation: int) -> bool:
    """Give a dispatch claim back after a recognised stale-turn rejection (or when nothing was sent)."""
    with store.atomic() as conn:
        return conn.execute(
            "UPDATE tasks SET state = 'pending', claimed_by = NULL, claim_generation = NULL, claimed_at = NULL "
            "WHERE request_id = ? AND state = 'claimed' AND claimed_by = 'dispatch' AND claim_generation = ?",
            (request_id, generation)).rowcount == 1


def bind_submission(store: InteractionStore, request_id: str, generation: int, thread_id: str,
                    turn_id: str) -> bool:
    """Persist the request/claim/generation/thread/turn binding of an accepted submission.

    The task is then on the provider delivery path: it leaves the receive path (no duplicate body) like pushed
    information, so the agent's own waits are not woken by the task it is already working on.
    """
    with store.atomic() as conn:
        now = now_ms()
        bound = conn.execute(
            "UPDATE tasks SET state = 'submitted', submitted_at = ?, thread_id = ?, turn_id = ? "
            "WHERE request_id = ? AND state = 'claimed' AND claimed_by = 'dispatch' AND claim_generation = ?",
            (now, thread_id, turn_id, request_id, generation)).rowcount == 1
        if bound:
            conn.execute("UPDATE interactions SET provider_delivered_at = ? WHERE public_id = ? "
                         "AND acked_at IS NULL", (now, request_id))
        return bound


def mark_uncertain(store: InteractionStore, request_id: str) -> None:
    with store.atomic() as conn:
        conn.execute("UPDATE tasks SET state = 'uncertain', uncertain_at = ? "
                     "WHERE request_id = ? AND state IN ('claimed', 'submitted')", (now_ms(), request_id))


def tasks_of_turn(store: InteractionStore, turn_id: str) -> list[str]:
    with store.atomic() as conn:
        return [r[0] for r in conn.execute(
            "SELECT request_id FROM tasks WHERE turn_id = ? AND state = 'submitted' AND outcome_status IS NULL "
            "ORDER BY interaction_id", (turn_id,))]


def capture_outcome(store: InteractionStore, request_id: str, status: ReplyStatus, text: str) -> bool:
    """Persist the terminal evidence of a task's turn (once); publication comes after."""
    with store.atomic() as conn:
        return conn.execute(
            "UPDATE tasks SET outcome_status = ?, outcome_text = ?, outcome_at = ? "
            "WHERE request_id = ? AND outcome_status IS NULL", (status.value, text, now_ms(), request_id)
        ).rowcount == 1


def publish_outcome(store: InteractionStore, request_id: str) -> Published | None:
    """Publish a captured outcome as the task's reply, unless an explicit reply already completed it.

    `done` comes from the agent (its final answer); `blocked` and `failed` are notices attributed to
    Wardian. Returns None when there is nothing captured to publish.
    """
    with store.atomic() as conn:
        r = conn.execute(
            "SELECT t.interaction_id, t.requester_id, t.recipient_id, t.reply_id, t.outcome_status, "
            "t.outcome_text, a.uuid FROM tasks t JOIN agents a ON a.id = t.requester_id "
            "WHERE t.request_id = ? AND t.outcome_status IS NOT NULL", (request_id,)).fetchone()
        if r is None:
            return None
        interaction_id, requester_id, recipient_id, reply_id, status, text, requester_uuid = r
        if reply_id is not None:
            # A committed explicit reply suppresses the automatic publication (seed).
            conn.execute("UPDATE tasks SET state = 'completed' WHERE interaction_id = ?", (interaction_id,))
            return Published(request_id, requester_uuid, None)
        kind = InteractionKind.REPLY if status == "done" else InteractionKind.NOTICE
        public_id = new_public_id(kind)
        created = now_ms()
        conn.execute(
            "INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, request_id, status, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (public_id, kind.value, recipient_id if kind is InteractionKind.REPLY else None, requester_id, text,
             request_id, status, created))
        conn.execute(
            "UPDATE tasks SET state = 'completed', completed_at = ?, reply_status = ?, reply_id = ? "
            "WHERE interaction_id = ?", (created, status, public_id, interaction_id))
    return Published(request_id, requester_uuid, public_id)


def unpublished_outcomes(store: InteractionStore) -> list[str]:
    """Captured outcomes whose publication did not happen (a crash between evidence and reply)."""
    with store.atomic() as conn:
        return [r[0] for r in conn.execute(
            "SELECT request_id FROM tasks WHERE outcome_status IS NOT NULL AND state != 'completed' "
            "ORDER BY interaction_id")]


def mark_lost_bindings_uncertain(store: InteractionStore) -> list[str]:
    """At startup: a submission whose turn was never observed to end lost its observation continuity."""
    with store.atomic() as conn:
        lost = [r[0] for r in conn.execute(
            "SELECT request_id FROM tasks WHERE state IN ('claimed', 'submitted') AND claimed_by = 'dispatch' "
            "AND outcome_status IS NULL")]
        conn.execute("UPDATE tasks SET state = 'uncertain', uncertain_at = ? WHERE state IN ('claimed', "
                     "'submitted') AND claimed_by = 'dispatch' AND outcome_status IS NULL", (now_ms(),))
    return lost


def interaction(store: InteractionStore, public_id: str) -> Interaction:
    with store.atomic() as conn:
        r = conn.execute(
            "SELECT i.public_id, i.kind, s.name, s.uuid, r.name, r.uuid, i.body, i.created_at, i.request_id, "
            "i.status, i.acked_at FROM interactions i LEFT JOIN agents s ON s.id = i.sender_id "
            "JOIN agents r ON r.id = i.recipient_id WHERE i.public_id = ?", (public_id,)).fetchone()
    return Interaction(id=r[0], kind=InteractionKind(r[1]), sender=Party(r[2], r[3]) if r[3] else None,
                       recipient=Party(r[4], r[5]), text=r[6], created_at=r[7], request_id=r[8],
                       status=ReplyStatus(r[9]) if r[9] else None, acked=r[10] is not None)


def mark_generation_lost(store: InteractionStore, agent_id: int, generation: int) -> list[str]:
    """An owner ended: its submissions whose turn was never seen to end lost their observation continuity."""
    with store.atomic() as conn:
        lost = [r[0] for r in conn.execute(
            "SELECT request_id FROM tasks WHERE recipient_id = ? AND claim_generation = ? AND claimed_by = 'dispatch' "
            "AND state = 'submitted' AND outcome_status IS NULL", (agent_id, generation))]
        conn.execute(
            "UPDATE tasks SET state = 'uncertain', uncertain_at = ? WHERE recipient_id = ? AND claim_generation = ? "
            "AND claimed_by = 'dispatch' AND state = 'submitted' AND outcome_status IS NULL",
            (now_ms(), agent_id, generation))
    return lost


def take_unseen_context(store: InteractionStore, agent_id: int) -> bool:
    """True (once) when information, a reply or a notice was pushed into the agent's conversation since its
    waits last reported it; dispatched tasks do not count (the agent is already working on them)."""
    with store.atomic() as conn:
        row = conn.execute(
            "SELECT max(i.id) FROM interactions i JOIN agents a ON a.id = i.recipient_id WHERE i.recipient_id = ? "
            "AND i.provider_delivered_at IS NOT NULL AND i.kind != 'task' AND i.id > a.context_seen_id",
            (agent_id,)).fetchone()
        if row[0] is None:
            return False
        conn.execute("UPDATE agents SET context_seen_id = ? WHERE id = ?", (row[0], agent_id))
        return True


def mark_provider_delivered(store: InteractionStore, public_ids: Sequence[str]) -> None:
    with store.atomic() as conn:
        conn.executemany("UPDATE interactions SET provider_delivered_at = ? WHERE public_id = ?",
                         [(now_ms(), pid) for pid in public_ids])


def failure_notice(store: InteractionStore, request_id: str, text: str) -> Published | None:
    """A definite failure before submission: one correlated `failed` notice from Wardian, committed
    together with the task's failure (seed: "The task and failure notice commit together")."""
    with store.atomic():
        if not capture_outcome(store, request_id, ReplyStatus.FAILED, text):
            return None
        return publish_outcome(store, request_id)


def clip_outcome(text: str) -> tuple[ReplyStatus, str] | None:
    """None when the final text fits a reply; else the blocked notice that replaces it (seed: 64 KiB)."""
    if not text.strip():
        return ReplyStatus.BLOCKED, "Wardian: the turn completed without final text; no answer was published."
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_MESSAGE_BYTES:
        return ReplyStatus.BLOCKED, (f"Wardian: the turn's final answer is {size} bytes, over the "
                                     f"{MAX_MESSAGE_BYTES}-byte reply limit; it was not published.")
    return None
