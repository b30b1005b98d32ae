"""The operator's read models of the mailbox: one record, its story and its request's trace, the exchange timeline,
and the log of every record, as functions of a `Store`. They only read; nothing here changes a record.

The console's exchange timeline (`exchange`) pages through every record newest first by id, each filter a bounded
range scan of migration 6's indexes (see there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wardian import errors
from wardian.model import (
    EXCHANGE_PREVIEW_CHARS,
    EXCHANGE_WINDOW,
    OPERATOR_UUID,
    ExchangePage,
    ExchangeRecord,
    Interaction,
    InteractionKind,
    InterruptFact,
    LogRecord,
    Party,
    RecordDelivery,
    RecordStory,
    ReplyStatus,
    RequestTrace,
    TaskEnd,
    TaskStory,
)
from wardian.store import usage
from wardian.store._sql import (
    KINDS,
    STATUSES,
    TASK_FACT_COLS,
    TASK_FACT_COUNT,
    facts_of,
    of_this_host,
    party_by_id,
    party_of_id,
)
from wardian.store.engine import Store
from wardian.taskpolicy import Lineage, TaskBounds

_T_FACT_COLS = "t." + TASK_FACT_COLS.replace(", ", ", t.")


def interaction(store: Store, public_id: str) -> Interaction:
    """Raises: UnknownRequest."""
    r = store.db.execute(
        "SELECT public_id, kind, sender_id, recipient_id, body, created_at, request_id, status, acked_at "
        "FROM interactions WHERE public_id = ?",
        (public_id,),
    ).fetchone()
    if r is None:
        raise errors.UnknownRequest(f"no record has id {public_id[:80]!r}", field="id")
    parties: dict[int, Party] = {}
    recipient = party_of_id(store.db, r[3], parties)
    return Interaction(
        r[0],
        KINDS[r[1]],
        party_by_id(store.db, r[2], parties),
        recipient,
        r[4],
        r[5],
        r[6],
        STATUSES[r[7]],
        r[8] is not None,
    )


def record_story(store: Store, public_id: str) -> RecordStory:
    """Raises: UnknownRequest (no record has that id)."""
    r = store.db.execute(
        "SELECT id, public_id, kind, sender_id, recipient_id, body, created_at, request_id, status, acked_at, "
        "(SELECT r.received_at FROM receipts r WHERE r.recipient_id = interactions.recipient_id "
        "AND r.interaction_id = interactions.id), push_state, provider_delivered_at, push_note "
        "FROM interactions WHERE public_id = ?",
        (public_id,),
    ).fetchone()
    if r is None:
        raise errors.UnknownRequest(
            f"no record has id {public_id[:80]!r}",
            field="id",
            allowed="an ask_, msg_, rep_ or ntc_ id of this home",
        )
    parties: dict[int, Party] = {}
    recipient = party_of_id(store.db, r[4], parties)
    record = Interaction(
        r[1],
        KINDS[r[2]],
        party_by_id(store.db, r[3], parties),
        recipient,
        r[5],
        r[6],
        r[7],
        STATUSES[r[8]],
        r[9] is not None,
    )
    delivery = RecordDelivery(r[10], r[9], r[11], r[12] if r[11] in ("done", "uncertain") else None, r[13])
    task: TaskStory | None = None
    answer: Interaction | None = None
    if record.request_id is not None:
        t = store.db.execute(
            f"SELECT {TASK_FACT_COLS}, requester_id, uncertain_reason, provider_message_id, outcome_status, "
            "outcome_at, lookup_note, rejections, rejection_note, deadline_at, end_reason, parent_request_id, "
            "root_request_id, depth FROM tasks WHERE request_id = ?",
            (record.request_id,),
        ).fetchone()
        if t is not None:
            n = TASK_FACT_COUNT
            requester = party_of_id(store.db, t[n], parties)
            bounds = TaskBounds(t[n + 8], t[n + 9], Lineage(t[n + 10], t[n + 11], t[n + 12]))
            task = TaskStory(facts_of(t[:n]), requester, t[n + 1], t[n + 2], STATUSES[t[n + 3]], t[n + 4], t[n + 5],
                             t[n + 6], t[n + 7], usage.of_task(store, record.request_id), bounds)
            if record.kind is InteractionKind.TASK and task.facts.reply_id is not None:
                answer = interaction(store, task.facts.reply_id)
    return RecordStory(record, delivery, task, answer)


def request_trace(store: Store, public_id: str) -> RequestTrace:
    """Raises: UnknownRequest (no record has that id)."""
    story = record_story(store, public_id)
    if story.interaction.kind is not InteractionKind.TASK and story.interaction.request_id is not None:
        story = record_story(store, story.interaction.request_id)  # a reply or notice: the task it answers
    answer = story.answer
    answer_story = record_story(store, answer.id) if answer is not None else None
    interrupts: tuple[InterruptFact, ...] = ()
    turn_tasks: tuple[str, ...] = ()
    turn_id = story.task.facts.turn_id if story.task is not None else None
    if turn_id is not None:
        parties: dict[int, Party] = {}
        rows = store.db.execute("SELECT id, caller_id, target_id, turn_id, created_at FROM interrupts "
                                "WHERE turn_id = ? ORDER BY id", (turn_id,)).fetchall()
        facts: list[InterruptFact] = []
        for r in rows:
            db = store.db
            caller, target = party_of_id(db, r[1], parties), party_of_id(db, r[2], parties)
            facts.append(InterruptFact(r[0], caller, target, r[3], r[4]))
        interrupts = tuple(facts)
        turn_tasks = tuple(r[0] for r in store.db.execute(
            "SELECT request_id FROM tasks WHERE turn_id = ? ORDER BY interaction_id", (turn_id,)))
    return RequestTrace(story, answer_story, interrupts, turn_tasks)


def exchange(
    store: Store,
    *,
    participant: int | None,
    kind: InteractionKind | None,
    uncertain: bool,
    before: int | None,
    limit: int,
    window: int = EXCHANGE_WINDOW,
) -> ExchangePage:
    """Raises: nothing for unknown values; an unknown participant or an id past the end gives an empty page."""
    db = store.db
    top = before if before is not None else int(
        db.execute("SELECT coalesce(max(id), 0) FROM interactions").fetchone()[0]) + 1
    # The participant window's lowest id, when there is more below it.
    low = max(top - window, 1) if participant is not None and not uncertain else 0
    arms, args = _exchange_arms(store, participant, kind, uncertain, top, low, limit)
    ids = " UNION ".join(f"SELECT id FROM ({arm}) AS arm{n}" for n, arm in enumerate(arms))
    rows = db.execute(
        "SELECT i.id, i.public_id, i.kind, i.sender_id, i.recipient_id, substr(i.body, 1, ?), length(i.body), "
        "i.created_at, i.request_id, i.status, i.acked_at, (SELECT r.received_at FROM receipts r "
        "WHERE r.recipient_id = i.recipient_id AND r.interaction_id = i.id), i.push_state, "
        "i.provider_delivered_at, "
        f"i.push_note, t.uncertain_reason, {_T_FACT_COLS} "
        f"FROM interactions i LEFT JOIN tasks t ON t.interaction_id = i.id WHERE i.id IN ({ids}) "
        "ORDER BY i.id DESC LIMIT ?", (EXCHANGE_PREVIEW_CHARS, *args, limit + 1)).fetchall()
    parties: dict[int, Party] = {}
    records = [_exchange_record(store, r, parties) for r in rows[:limit]]
    if len(rows) > limit:
        return ExchangePage(tuple(records), records[-1].seq)
    if low > 1:
        return ExchangePage(tuple(records), low, searched_to=low)  # the window ended the page: go on below it
    return ExchangePage(tuple(records), None)


def _exchange_arms(store: Store, participant: int | None, kind: InteractionKind | None, uncertain: bool, top: int,
                   low: int, limit: int) -> tuple[list[str], list[object]]:
    """The id queries (each newest first below `top`, at most `limit` + 1 ids) whose union is an exchange page."""
    if uncertain:
        # Few records are uncertain: walk the two partial indexes of them, filtering as we go.
        where, extra = _exchange_filter(participant, kind)
        return [
            "SELECT i.id FROM tasks t JOIN interactions i ON i.id = t.interaction_id "
            f"WHERE t.state = 'uncertain' AND t.interaction_id < ?{where} ORDER BY t.interaction_id DESC LIMIT ?",
            f"SELECT i.id FROM interactions i WHERE i.push_state = 'uncertain' AND i.id < ?{where} "
            "ORDER BY i.id DESC LIMIT ?",
        ], [top, *extra, limit + 1, top, *extra, limit + 1]
    if participant is not None:
        # Per kind, a backward range scan of the narrow `interactions_by_kind` (kind, id, sender, recipient)
        # over the window's ids: never more than `window` entries, whatever the size of the store.
        arms: list[str] = []
        args: list[object] = []
        for k in [kind.value] if kind is not None else [k.value for k in InteractionKind]:
            arms.append(
                f"SELECT id FROM interactions {store.backend.index_hint('interactions_by_kind')} WHERE kind = ? "
                "AND id < ? AND id >= ? AND (sender_id = ? OR recipient_id = ?) ORDER BY id DESC LIMIT ?"
            )
            args += [k, top, low, participant, participant, limit + 1]
        return arms, args
    if kind is not None:
        return ["SELECT id FROM interactions WHERE kind = ? AND id < ? ORDER BY id DESC LIMIT ?"], [
            kind.value, top, limit + 1]
    return ["SELECT id FROM interactions WHERE id < ? ORDER BY id DESC LIMIT ?"], [top, limit + 1]


def _exchange_record(store: Store, r: Sequence[Any], parties: dict[int, Party]) -> ExchangeRecord:
    db = store.db
    record = Interaction(r[1], KINDS[r[2]], party_by_id(db, r[3], parties), party_of_id(db, r[4], parties),
                         r[5], r[7], r[8], STATUSES[r[9]], r[10] is not None)
    delivery = RecordDelivery(r[11], r[10], r[12], r[13] if r[12] in ("done", "uncertain") else None, r[14])
    return ExchangeRecord(r[0], record, r[6], delivery, facts_of(r[16:]) if r[16] is not None else None, r[15])


def log_records(store: Store, limit: int) -> list[LogRecord]:
    """Every record, oldest first, acknowledged or not, with its task facts (operator views, evidence)."""
    rows = store.db.execute(
        "SELECT i.public_id, i.kind, i.sender_id, i.recipient_id, i.body, i.created_at, i.request_id, i.status, "
        f"i.acked_at, {_T_FACT_COLS} "
        "FROM interactions i LEFT JOIN tasks t ON t.interaction_id = i.id ORDER BY i.id LIMIT ?",
        (limit,)).fetchall()
    parties: dict[int, Party] = {}
    out: list[LogRecord] = []
    for r in rows:
        recipient = party_of_id(store.db, r[3], parties)
        record = Interaction(r[0], KINDS[r[1]], party_by_id(store.db, r[2], parties), recipient, r[4], r[5],
                             r[6], STATUSES[r[7]], r[8] is not None)
        out.append(LogRecord(record, facts_of(r[9:]) if r[9] is not None else None))
    return out


def _exchange_filter(participant: int | None, kind: InteractionKind | None) -> tuple[str, list[object]]:
    """The extra WHERE terms (on `i`, the interactions row) of an exchange filter, and their arguments.

    The unary `+` keeps SQLite from answering them with the participant or kind indexes: the uncertain arms must walk
    their own small partial indexes and filter on the way, not sort all of a participant's records."""
    where = ""
    args: list[object] = []
    if participant is not None:
        where += " AND (+i.sender_id = ? OR +i.recipient_id = ?)"
        args += [participant, participant]
    if kind is not None:
        where += " AND +i.kind = ?"
        args.append(kind.value)
    return where, args


def last_interaction_id(store: Store) -> int:
    """The newest record's store order (0: none yet): what `person_task_ends` reads past."""
    row = store.db.execute("SELECT MAX(id) FROM interactions").fetchone()
    return int(row[0] or 0)


def person_task_ends(store: Store, after: int, limit: int) -> list[TaskEnd]:
    """The answers (reply or notice) to tasks the operator sent, past store order `after`, oldest first, for tasks
    whose agent belongs to this host; agent-to-agent tasks are not among them."""
    mine, args = of_this_host(store, "t.recipient_id")
    rows = store.db.execute(
        "SELECT i.id, i.request_id, i.public_id, a.name, a.uuid, i.status, i.created_at FROM interactions i "
        "JOIN tasks t ON t.request_id = i.request_id AND t.reply_id = i.public_id "
        "JOIN agents a ON a.id = t.recipient_id "
        "WHERE i.recipient_id = (SELECT id FROM agents WHERE uuid = ?) AND i.id > ? AND i.kind IN (?, ?)"
        f"{mine} ORDER BY i.id LIMIT ?",
        (OPERATOR_UUID, after, InteractionKind.REPLY.value, InteractionKind.NOTICE.value, *args, limit)).fetchall()
    return [TaskEnd(r[0], r[1], r[2], Party(r[3], r[4]), ReplyStatus(r[5]), r[6]) for r in rows]
