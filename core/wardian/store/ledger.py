"""The task ledger: every change to a task's delivery facts, in one place (automatic delivery and replies), as
functions of a `Store`.

```
pending --claim--> claimed --bind--> submitted --capture--> (outcome) --publish--> completed
   ^                 |                   |                                            ^
   `----release------'                   `--> uncertain (never resubmitted) ----------|  (an explicit reply)
```

Invariants:
- One durable claim per task, shared by manual receive and automatic dispatch: a conditional UPDATE
  (`pending` -> `claimed`, with claim kind and generation) that exactly one claimer wins.
- A dispatch claim is released only by its own generation (a confirmed rejection, or nothing was sent).
- The request/claim/generation/thread/turn binding is persisted before any completion is published; a bound task
  leaves the receive path (it is on the provider delivery path, like pushed information).
- Terminal evidence (`outcome_*`) is captured before the reply is published, in its own transaction, so a crash
  between the two is recovered by publishing the captured outcome, never by rerunning the turn.
- An uncertain delivery stays uncertain: nothing here moves a task out of `uncertain` except a reply.
- `_complete` is the one writer of a reply or notice for a task, and it writes at most one: its conditional
  UPDATE takes the task's reply slot before the record is inserted. An explicit reply, a published outcome and a
  Wardian failure notice all go through it.
"""

from __future__ import annotations

from wardian import errors
from wardian.model import (
    Caller,
    ClaimKind,
    DeliveryDoubts,
    InteractionKind,
    Party,
    PendingTask,
    Published,
    ReplyReceipt,
    ReplyStatus,
    TaskFacts,
)
from wardian.store._sql import TASK_FACT_COLS, facts_of, new_public_id, now_ms, of_this_host
from wardian.store.api import Pushable
from wardian.store.engine import Store


# --- reading ----------------------------------------------------------------------------------------
def task(store: Store, request_id: str) -> TaskFacts:
    """Raises: UnknownRequest."""
    row = store.db.execute(f"SELECT {TASK_FACT_COLS} FROM tasks WHERE request_id = ?", (request_id,)).fetchone()
    if row is None:
        raise errors.UnknownRequest(f"no task has request id {request_id[:80]!r}", field="request_id")
    return facts_of(row)


def task_facts_of(store: Store, interaction_id: int) -> TaskFacts:
    return facts_of(store.db.execute(f"SELECT {TASK_FACT_COLS} FROM tasks WHERE interaction_id = ?",
                                     (interaction_id,)).fetchone())


def pending_tasks(store: Store, agent_id: int, limit: int = 50) -> list[PendingTask]:
    rows = store.db.execute(
        "SELECT t.request_id, i.body, a.name, a.uuid, i.created_at FROM tasks t "
        "JOIN interactions i ON i.id = t.interaction_id JOIN agents a ON a.id = t.requester_id "
        "WHERE t.recipient_id = ? AND t.state = 'pending' ORDER BY t.interaction_id LIMIT ?",
        (agent_id, limit),
    ).fetchall()
    return [PendingTask(r[0], r[1], Party(r[2], r[3]), r[4]) for r in rows]


def tasks_of_turn(store: Store, turn_id: str) -> list[str]:
    return [r[0] for r in store.db.execute(
        "SELECT request_id FROM tasks WHERE turn_id = ? AND state = 'submitted' AND outcome_status IS NULL "
        "ORDER BY interaction_id", (turn_id,))]


def unpublished_outcomes(store: Store) -> list[str]:
    mine, args = of_this_host(store, "recipient_id")
    return [r[0] for r in store.db.execute(
        f"SELECT request_id FROM tasks WHERE outcome_status IS NOT NULL AND state != 'completed'{mine} "
        "ORDER BY interaction_id", args)]


# --- claims -----------------------------------------------------------------------------------------
def claim_task(
    store: Store,
    request_id: str,
    by: ClaimKind,
    generation: int,
    provider_message_id: str | None = None,
    thread_id: str | None = None,
) -> bool:
    """Take the one durable claim of a pending task; True only for the single winner. A dispatch claim of a
    provider that lets the client choose its message id persists that id (and the conversation) with the claim,
    so the ask_ <-> message binding is durable before a byte of the submission leaves."""
    sql = ("UPDATE tasks SET state = 'claimed', claimed_by = ?, claim_generation = ?, claimed_at = ?, "
           "provider_message_id = ?, thread_id = COALESCE(?, thread_id) WHERE request_id = ? AND state = 'pending'")
    params: tuple[object, ...] = (by.value, generation, now_ms(), provider_message_id, thread_id, request_id)
    if by is ClaimKind.DISPATCH:
        # Fenced: only the runtime generation the recipient has now, on the host that serves it, may
        # dispatch. An app cut off from the store whose host was taken over meanwhile (a new generation) cannot.
        sql += (" AND EXISTS (SELECT 1 FROM agents a WHERE a.id = tasks.recipient_id AND a.generation = ? "
                "AND (CAST(? AS TEXT) IS NULL OR a.host = ?))")
        params += (generation, store.host, store.host)
    with store.atomic():
        return store.db.write(sql, params).rowcount == 1


def claim_for_receive(store: Store, interaction_id: int, generation: int, now: int) -> bool:
    """The claim a receive takes of a task in its page (inside the receive's transaction)."""
    return store.db.write(
        "UPDATE tasks SET state = 'claimed', claimed_by = 'receive', claim_generation = ?, claimed_at = ? "
        "WHERE interaction_id = ? AND state = 'pending'", (generation, now, interaction_id)).rowcount == 1


def release_claim(store: Store, request_id: str, generation: int, rejection: str | None = None) -> bool:
    """Give a dispatch claim of this generation back (a confirmed rejection, or nothing was sent); `rejection`:
    the provider definitely refused the submission, in these words (counted and kept with the task)."""
    with store.atomic():
        return store.db.write(
            "UPDATE tasks SET state = 'pending', claimed_by = NULL, claim_generation = NULL, claimed_at = NULL, "
            "provider_message_id = NULL, "
            "rejections = rejections + CASE WHEN CAST(? AS TEXT) IS NULL THEN 0 ELSE 1 END, "
            "rejection_note = coalesce(?, rejection_note) "
            "WHERE request_id = ? AND state = 'claimed' AND claimed_by = 'dispatch' AND claim_generation = ?",
            (rejection, rejection, request_id, generation)).rowcount == 1


# --- submission -------------------------------------------------------------------------------------
def bind_submission(
    store: Store, request_id: str, generation: int, thread_id: str, turn_id: str, lookup: str | None = None
) -> bool:
    """Persist the request/claim/generation/thread/turn binding of an accepted submission; `lookup`: why the
    provider's answer was lost when a lookup then found the message (recorded as confirmed by lookup)."""
    with store.atomic():
        now = now_ms()
        bound = store.db.write(
            "UPDATE tasks SET state = 'submitted', submitted_at = ?, thread_id = ?, turn_id = ?, "
            "lookup = CASE WHEN CAST(? AS TEXT) IS NULL THEN lookup ELSE 'confirmed' END, "
            "lookup_note = coalesce(?, lookup_note) "
            "WHERE request_id = ? AND state = 'claimed' AND claimed_by = 'dispatch' AND claim_generation = ?",
            (now, thread_id, turn_id, lookup, lookup, request_id, generation)).rowcount == 1
        if bound:
            # On the provider delivery path now: no duplicate body on the receive path, and the agent's own
            # waits are not woken by the task it is already working on.
            store.db.write("UPDATE interactions SET provider_delivered_at = ? WHERE public_id = ? AND acked_at IS NULL",
                           (now, request_id))
        return bound


def mark_uncertain(store: Store, request_id: str, reason: str, looked_up: bool = False) -> None:
    """The submission's outcome is unknown (`looked_up`: a lookup of its message found nothing)."""
    with store.atomic():
        store.db.write(
            "UPDATE tasks SET state = 'uncertain', uncertain_at = ?, uncertain_reason = ?, "
            "lookup = CASE WHEN ? THEN 'not_found' ELSE lookup END "
            "WHERE request_id = ? AND state IN ('claimed', 'submitted')", (now_ms(), reason, looked_up, request_id))


def delivery_doubts(store: Store) -> dict[int, DeliveryDoubts]:
    """By agent id, for agents with any: their tasks' uncertain deliveries and those confirmed by lookup."""
    # Both arms read a partial index (migration 7), so the cost follows the number of doubtful tasks.
    rows = store.db.execute(
        "SELECT recipient_id, sum(u), sum(c) FROM ("
        "SELECT recipient_id, 1 AS u, 0 AS c FROM tasks WHERE state = 'uncertain' UNION ALL "
        "SELECT recipient_id, 0, 1 FROM tasks WHERE lookup = 'confirmed') AS doubts "
        "GROUP BY recipient_id"
    ).fetchall()
    return {r[0]: DeliveryDoubts(uncertain=r[1], confirmed_by_lookup=r[2]) for r in rows}


def mark_lost_bindings_uncertain(store: Store, reason: str) -> list[str]:
    """At startup: dispatched tasks whose turn was never observed to end become uncertain."""
    mine, args = of_this_host(store, "recipient_id")
    with store.atomic():
        lost = [
            r[0]
            for r in store.db.execute(
                "SELECT request_id FROM tasks WHERE state IN ('claimed', 'submitted') AND claimed_by = 'dispatch' "
                f"AND outcome_status IS NULL{mine}",
                args,
            )
        ]
        store.db.write(
            "UPDATE tasks SET state = 'uncertain', uncertain_at = ?, uncertain_reason = ? "
            f"WHERE state IN ('claimed', 'submitted') AND claimed_by = 'dispatch' AND outcome_status IS NULL{mine}",
            (now_ms(), reason, *args),
        )
    return lost


def mark_generation_lost(store: Store, agent_id: int, generation: int, reason: str) -> list[str]:
    # Claimed but not bound: the runtime ended while the submission was in flight, so it may have left.
    """An owner ended: its submissions whose turn was never observed to end become uncertain."""
    with store.atomic():
        lost = [
            r[0]
            for r in store.db.execute(
                "SELECT request_id FROM tasks WHERE recipient_id = ? AND claim_generation = ? "
                "AND claimed_by = 'dispatch' AND state IN ('claimed', 'submitted') AND outcome_status IS NULL",
                (agent_id, generation),
            )
        ]
        store.db.write(
            "UPDATE tasks SET state = 'uncertain', uncertain_at = ?, uncertain_reason = ? WHERE recipient_id = ? "
            "AND claim_generation = ? AND claimed_by = 'dispatch' AND state IN ('claimed', 'submitted') "
            "AND outcome_status IS NULL",
            (now_ms(), reason, agent_id, generation),
        )
    return lost


# --- completion -------------------------------------------------------------------------------------
def capture_outcome(store: Store, request_id: str, status: ReplyStatus, text: str) -> bool:
    """Persist the terminal evidence of a task's turn (once); publication comes after."""
    with store.atomic():
        return (
            store.db.write(
                "UPDATE tasks SET outcome_status = ?, outcome_text = ?, outcome_at = ? "
                "WHERE request_id = ? AND outcome_status IS NULL",
                (status.value, text, now_ms(), request_id),
            ).rowcount
            == 1
        )


def publish_outcome(store: Store, request_id: str, push: Pushable | None = None) -> Published | None:
    """Publish a captured outcome as the task's reply (`done`) or Wardian notice, unless an explicit reply
    already completed it. None when nothing is captured."""
    with store.atomic():
        r = store.db.execute(
            "SELECT t.interaction_id, t.requester_id, t.recipient_id, t.reply_id, t.outcome_status, "
            "t.outcome_text, a.uuid, t.claim_generation FROM tasks t JOIN agents a ON a.id = t.requester_id "
            "WHERE t.request_id = ? AND t.outcome_status IS NOT NULL",
            (request_id,),
        ).fetchone()
        if r is None:
            return None
        interaction_id, requester_id, recipient_id, reply_id, status, text, requester_uuid, generation = r
        if reply_id is not None:
            # A committed explicit reply suppresses the automatic publication: a task has one answer.
            store.db.write("UPDATE tasks SET state = 'completed' WHERE interaction_id = ?", (interaction_id,))
            return Published(request_id, requester_uuid, None)
        # `done` comes from the agent (its final answer); `blocked` and `failed` are notices from Wardian.
        done = status == ReplyStatus.DONE.value
        pushing = push is not None and push(requester_uuid)
        record_id, _ = _complete(store, interaction_id, request_id, requester_id, recipient_id if done else None,
                                 ReplyStatus(status), text, generation, push=pushing)
    return Published(request_id, requester_uuid, record_id, pushing)


def reply(store: Store, caller: Caller, request_id: str, status: ReplyStatus, text: str,
          push: Pushable | None = None) -> ReplyReceipt:
    """An explicit reply by the task's assigned recipient, once.
    Raises: UnknownRequest, NotATask, NotRecipient, AlreadyCompleted."""
    with store.atomic():
        row = store.db.execute(
            "SELECT t.interaction_id, t.requester_id, t.recipient_id, t.reply_status, t.reply_id, a.name, a.uuid "
            "FROM tasks t JOIN agents a ON a.id = t.requester_id WHERE t.request_id = ?", (request_id,),
        ).fetchone()
        if row is None:
            other = store.db.execute("SELECT kind FROM interactions WHERE public_id = ?",
                                     (request_id,)).fetchone()
            if other is not None:
                raise errors.NotATask(
                    f"{request_id[:80]!r} is a {other[0]} record, not a task; only an assigned task's "
                    "ask_ request id can be replied to", field="request_id")
            raise errors.UnknownRequest(f"no task has request id {request_id[:80]!r}", field="request_id")
        if row[2] != caller.agent.id:
            raise errors.NotRecipient("only the task's assigned recipient may reply to it", field="request_id")
        if row[4] is not None:
            raise errors.AlreadyCompleted(f"the task was already completed with status {row[3]!r}",
                                          field="request_id", status=row[3], reply_id=row[4])
        pushing = push is not None and push(row[6])
        reply_id, created = _complete(store, row[0], request_id, row[1], caller.agent.id, status, text,
                                      caller.generation, claim_as="reply", push=pushing)
    return ReplyReceipt(reply_id=reply_id, request_id=request_id, status=status, requester=Party(row[5], row[6]),
                        created_at=created, pushing=pushing)


def fail_task(store: Store, request_id: str, generation: int, text: str,
              push: Pushable | None = None) -> Published | None:
    """A definite failure before submission: claim the pending task and answer it with one correlated
    `failed` notice, all in one transaction. None when the task was no longer pending."""
    with store.atomic():
        if not claim_task(store, request_id, ClaimKind.DISPATCH, generation):
            return None
        capture_outcome(store, request_id, ReplyStatus.FAILED, text)
        return publish_outcome(store, request_id, push)


def answer_open_tasks(store: Store, recipient_id: int, text: str, uncertain_reason: str,
                      push: Pushable | None = None) -> tuple[list[Published], list[str]]:
    """Every task of `recipient_id` still pending or claimed gets one correlated `failed` notice from Wardian; one
    submitted to a turn whose outcome is unknown becomes uncertain (its recipient goes away)."""
    published: list[Published] = []
    with store.atomic():
        # A dispatch claim may have a submission in flight: uncertain below, never answered as failed.
        rows = store.db.execute(
            "SELECT t.interaction_id, t.request_id, t.requester_id, a.uuid FROM tasks t "
            "JOIN agents a ON a.id = t.requester_id WHERE t.recipient_id = ? AND t.reply_id IS NULL "
            "AND (t.state = 'pending' OR (t.state = 'claimed' AND t.claimed_by != 'dispatch')) "
            "ORDER BY t.interaction_id", (recipient_id,)).fetchall()
        for interaction_id, request_id, requester_id, requester_uuid in rows:
            pushing = push is not None and push(requester_uuid)
            record_id, _ = _complete(store, interaction_id, request_id, requester_id, None, ReplyStatus.FAILED,
                                     text, None, push=pushing)
            published.append(Published(request_id, requester_uuid, record_id, pushing))
        in_flight = ("recipient_id = ? AND (state = 'submitted' OR (state = 'claimed' "
                     "AND claimed_by = 'dispatch')) AND outcome_status IS NULL")
        uncertain = [r[0] for r in store.db.execute(
            f"SELECT request_id FROM tasks WHERE {in_flight} ORDER BY interaction_id", (recipient_id,))]
        store.db.write(f"UPDATE tasks SET state = 'uncertain', uncertain_at = ?, uncertain_reason = ? "
                       f"WHERE {in_flight}", (now_ms(), uncertain_reason, recipient_id))
    return published, uncertain


def _complete(store: Store, interaction_id: int, request_id: str, requester_id: int, sender_id: int | None,
              status: ReplyStatus, text: str, generation: int | None, *, claim_as: str | None = None,
              push: bool = False) -> tuple[str, int]:
    """Write the task's one reply (`sender_id` an agent) or Wardian notice (`sender_id` None) and complete it.

    The conditional UPDATE takes the task's reply slot first; if another reply holds it, nothing is written.
    `claim_as`: an explicit reply to an unclaimed task records the claim it implies. `push`: the record is
    admitted for a push into the requester's live conversation (hidden from receive until the push settles).

    Raises:
        AlreadyCompleted: the task already has its reply.
    """
    kind = InteractionKind.REPLY if sender_id is not None else InteractionKind.NOTICE
    public_id = new_public_id(kind)
    created = now_ms()
    taken = store.db.write(
        "UPDATE tasks SET state = 'completed', completed_at = ?, reply_status = ?, reply_id = ?, "
        "claimed_by = COALESCE(claimed_by, ?), claimed_at = COALESCE(claimed_at, ?), "
        "claim_generation = COALESCE(claim_generation, ?) WHERE interaction_id = ? AND reply_id IS NULL",
        (created, status.value, public_id, claim_as, created if claim_as else None, generation,
         interaction_id)).rowcount
    if taken != 1:
        existing = store.db.execute("SELECT reply_status, reply_id FROM tasks WHERE interaction_id = ?",
                                    (interaction_id,)).fetchone()
        raise errors.AlreadyCompleted(f"the task was already completed with status {existing[0]!r}",
                                      field="request_id", status=existing[0], reply_id=existing[1])
    store.db.write(
        "INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, request_id, status, "
        "created_at, push_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (public_id, kind.value, sender_id, requester_id, text, request_id, status.value, created,
         "sending" if push else None))
    return public_id, created
