"""Records and their recipients' reading positions (the mailbox half of the store).

Receive and acknowledgement work on an index of only the unread, not-yet-pushed records of a recipient
(migration 3). The console's exchange timeline (`exchange`) pages through every record newest first by id, each
filter a bounded range scan of migration 6's indexes (see there).

A cursor names an exact (start, end] id range of one recipient's mailbox, MAC-protected with the
store's key and bound to its epoch, so a forged, another recipient's or a recreated store's cursor is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from typing import Any

from wardian import errors
from wardian.faults import crashpoint
from wardian.model import (
    EXCHANGE_PREVIEW_CHARS,
    EXCHANGE_WINDOW,
    MAX_PAGE_TEXT_BYTES,
    Agent,
    AgentStatus,
    Caller,
    ExchangePage,
    ExchangeRecord,
    Interaction,
    InteractionKind,
    InterruptFact,
    InterruptReceipt,
    LogRecord,
    Party,
    Receipt,
    ReceivedRecord,
    ReceivePage,
    RecordDelivery,
    RecordStory,
    RequestTrace,
    TaskStory,
)
from wardian.store._sql import (
    KINDS,
    STATUSES,
    TASK_FACT_COLS,
    TASK_FACT_COUNT,
    SqlBase,
    facts_of,
    new_public_id,
    now_ms,
    party_of,
)

CURSOR_PREFIX = "cur1_"
_CURSOR_STRUCT = struct.Struct(">8sQQQ")  # epoch, recipient agent id, start (exclusive), end (inclusive)
_MAC_BYTES = 16
INSERT_INTERACTION = ("INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, request_id, "
                      "created_at, push_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_INTERACTION_ID = INSERT_INTERACTION + " RETURNING id"
# A record admitted for a push is hidden from receive from its first commit: it reaches its recipient through
# exactly one path (#13).
PUSH_SENDING = "sending"


def _exchange_filter(participant: int | None, kind: InteractionKind | None) -> tuple[str, list[object]]:
    """The extra WHERE terms (on `i`, the interactions row) of an exchange filter, and their arguments.

    The unary `+` keeps SQLite from answering them with the participant or kind indexes: the uncertain arms must walk
    their own small partial indexes and filter on the way, not sort all of a participant's records."""
    where, args = "", []
    if participant is not None:
        where += " AND (+i.sender_id = ? OR +i.recipient_id = ?)"
        args += [participant, participant]
    if kind is not None:
        where += " AND +i.kind = ?"
        args.append(kind.value)
    return where, args


class MailboxOps(SqlBase):
    def admit(
        self, caller: Caller, recipient: Agent, kind: InteractionKind, text: str, *, push: bool = False
    ) -> Receipt:
        assert kind in (InteractionKind.INFORMATION, InteractionKind.TASK)
        public_id = new_public_id(kind)
        created = now_ms()
        task = kind is InteractionKind.TASK
        request_id = public_id if task else None
        values = (
            public_id,
            kind.value,
            caller.agent.id,
            recipient.id,
            text,
            request_id,
            created,
            PUSH_SENDING if push and not task else None,
        )
        if task or not self._depth:
            with self.atomic():
                if task:
                    interaction_id = self._db.execute(INSERT_INTERACTION_ID, values).fetchone()[0]
                    self._db.execute(
                        "INSERT INTO tasks (interaction_id, request_id, requester_id, recipient_id, state) "
                        "VALUES (?, ?, ?, ?, 'pending')",
                        (interaction_id, public_id, caller.agent.id, recipient.id),
                    )
                else:
                    self._db.execute(INSERT_INTERACTION, values)
                crashpoint("after_insert_before_commit")
        else:
            # One statement inside an open transaction is atomic by itself: no savepoint (#2, send path).
            self._db.execute(INSERT_INTERACTION, values)
            crashpoint("after_insert_before_commit")
        return Receipt(
            interaction_id=public_id,
            kind=kind,
            request_id=request_id,
            sender=party_of(caller.agent),
            recipient=party_of(recipient),
            created_at=created,
            pushing=values[7] is not None,
        )

    def has_unacked(self, agent_id: int) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM interactions WHERE recipient_id = ? AND acked_at IS NULL "
            "AND provider_delivered_at IS NULL AND push_state IS NULL LIMIT 1",
            (agent_id,),
        ).fetchone()
        return row is not None

    def receive(self, caller: Caller, *, cursor: str | None, ack_cursor: str | None, limit: int) -> ReceivePage:
        me = caller.agent.id
        after = self.decode_cursor(cursor, me, "cursor")[1] if cursor is not None else 0
        ack_range = self.decode_cursor(ack_cursor, me, "ack_cursor") if ack_cursor is not None else None
        db = self._db
        with self.atomic():
            acked = 0
            now = now_ms()
            if ack_range is not None:
                # Only what a receive returned can be acknowledged: a record a push gave back to the receive path
                # after that page was read lies in its range unseen, and stays unacknowledged.
                acked = db.execute(
                    "UPDATE interactions SET acked_at = ? WHERE recipient_id = ? AND id > ? AND id <= ? "
                    "AND acked_at IS NULL AND provider_delivered_at IS NULL AND received_at IS NOT NULL",
                    (now, me, ack_range[0], ack_range[1])).rowcount
            rows = db.execute(
                "SELECT id, public_id, kind, sender_id, body, request_id, status, created_at, received_at "
                "FROM interactions WHERE recipient_id = ? AND acked_at IS NULL AND provider_delivered_at IS NULL "
                "AND push_state IS NULL AND id > ? ORDER BY id LIMIT ?", (me, after, limit + 1)).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            page: list[Any] = []
            text_bytes = 0
            for row in rows:
                size = len(row[4].encode("utf-8", "surrogatepass"))
                if page and text_bytes + size > MAX_PAGE_TEXT_BYTES:
                    more = True
                    break
                text_bytes += size
                page.append(row)
            if page and any(row[8] is None for row in page):
                # Returned now: from here on this record travels the receive path only (never pushed as well).
                db.execute("UPDATE interactions SET received_at = ? WHERE recipient_id = ? AND id > ? AND id <= ? "
                           "AND received_at IS NULL AND acked_at IS NULL AND provider_delivered_at IS NULL "
                           "AND push_state IS NULL", (now, me, after, page[-1][0]))
            parties: dict[int, Party] = {me: party_of(caller.agent)}
            records: list[ReceivedRecord] = []
            for row in page:
                facts = None
                new_work = False
                if row[2] == InteractionKind.TASK:
                    new_work = self.claim_for_receive(row[0], caller.generation, now)
                    facts = self.task_facts_of(row[0])
                records.append(ReceivedRecord(
                    Interaction(row[1], KINDS[row[2]], self._party_by_id(row[3], parties), parties[me], row[4],
                                row[7], row[5], STATUSES[row[6]], False),
                    new_work, facts))
        next_cursor = self.encode_cursor(me, after, page[-1][0]) if page else None
        return ReceivePage(records=tuple(records), cursor=next_cursor, acked=acked, more=more)

    def record_interrupt(self, caller: Caller, target: Agent) -> InterruptReceipt:
        with self.atomic():
            row = self._db.execute("SELECT status, active_turn_id FROM agents WHERE id = ?", (target.id,)).fetchone()
            status = AgentStatus(row[0])
            if status is not AgentStatus.ACTIVE or row[1] is None:
                raise errors.NotActive(
                    f"agent {target.name!r} has no active turn (status {status.value}); nothing was interrupted",
                    field="target",
                    status=status.value,
                )
            created = now_ms()
            interrupt_id = int(
                self._db.execute(
                    "INSERT INTO interrupts (caller_id, target_id, turn_id, state, created_at) "
                    "VALUES (?, ?, ?, 'requested', ?) RETURNING id",
                    (caller.agent.id, target.id, row[1], created),
                ).fetchone()[0]
            )
            return InterruptReceipt(
                interrupt_id=interrupt_id, target=party_of(target), turn_id=row[1], created_at=created
            )

    def interaction(self, public_id: str) -> Interaction:
        r = self._db.execute(
            "SELECT public_id, kind, sender_id, recipient_id, body, created_at, request_id, status, acked_at "
            "FROM interactions WHERE public_id = ?",
            (public_id,),
        ).fetchone()
        if r is None:
            raise errors.UnknownRequest(f"no record has id {public_id[:80]!r}", field="id")
        parties: dict[int, Party] = {}
        recipient = self._party_by_id(r[3], parties)
        assert recipient is not None
        return Interaction(
            r[0],
            KINDS[r[1]],
            self._party_by_id(r[2], parties),
            recipient,
            r[4],
            r[5],
            r[6],
            STATUSES[r[7]],
            r[8] is not None,
        )

    def record_story(self, public_id: str) -> RecordStory:
        """Raises: UnknownRequest (no record has that id)."""
        r = self._db.execute(
            "SELECT id, public_id, kind, sender_id, recipient_id, body, created_at, request_id, status, acked_at, "
            "received_at, push_state, provider_delivered_at, push_note FROM interactions WHERE public_id = ?",
            (public_id,),
        ).fetchone()
        if r is None:
            raise errors.UnknownRequest(
                f"no record has id {public_id[:80]!r}",
                field="id",
                allowed="an ask_, msg_, rep_ or ntc_ id of this home",
            )
        parties: dict[int, Party] = {}
        recipient = self._party_by_id(r[4], parties)
        assert recipient is not None
        interaction = Interaction(
            r[1],
            KINDS[r[2]],
            self._party_by_id(r[3], parties),
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
        if interaction.request_id is not None:
            t = self._db.execute(
                f"SELECT {TASK_FACT_COLS}, requester_id, uncertain_reason, provider_message_id, outcome_status, "
                "outcome_at, lookup_note, rejections, rejection_note FROM tasks WHERE request_id = ?",
                (interaction.request_id,),
            ).fetchone()
            if t is not None:
                n = TASK_FACT_COUNT
                requester = self._party_by_id(t[n], parties)
                assert requester is not None
                task = TaskStory(facts_of(t[:n]), requester, t[n + 1], t[n + 2], STATUSES[t[n + 3]], t[n + 4], t[n + 5],
                                 t[n + 6], t[n + 7])
                if interaction.kind is InteractionKind.TASK and task.facts.reply_id is not None:
                    answer = self.interaction(task.facts.reply_id)
        return RecordStory(interaction, delivery, task, answer)

    def exchange(
        self,
        *,
        participant: int | None,
        kind: InteractionKind | None,
        uncertain: bool,
        before: int | None,
        limit: int,
        window: int = EXCHANGE_WINDOW,
    ) -> ExchangePage:
        """Raises: nothing for unknown values; an unknown participant or an id past the end gives an empty page."""
        top = (
            before
            if before is not None
            else int(self._db.execute("SELECT coalesce(max(id), 0) FROM interactions").fetchone()[0]) + 1
        )
        low = 0  # the participant window's lowest id, when there is more below it
        arms: list[str] = []
        args: list[object] = []
        if uncertain:
            # Few records are uncertain: walk the two partial indexes of them, filtering as we go.
            where, extra = _exchange_filter(participant, kind)
            arms.append(
                "SELECT i.id FROM tasks t JOIN interactions i ON i.id = t.interaction_id "
                f"WHERE t.state = 'uncertain' AND t.interaction_id < ?{where} "
                "ORDER BY t.interaction_id DESC LIMIT ?"
            )
            args += [top, *extra, limit + 1]
            arms.append(
                f"SELECT i.id FROM interactions i WHERE i.push_state = 'uncertain' AND i.id < ?{where} "
                "ORDER BY i.id DESC LIMIT ?"
            )
            args += [top, *extra, limit + 1]
        elif participant is not None:
            # Per kind, a backward range scan of the narrow `interactions_by_kind` (kind, id, sender, recipient)
            # over the window's ids: never more than `window` entries, whatever the size of the store.
            low = max(top - window, 1)
            for k in [kind.value] if kind is not None else [k.value for k in InteractionKind]:
                arms.append(
                    f"SELECT id FROM interactions {self._index_hint('interactions_by_kind')} WHERE kind = ? "
                    "AND id < ? AND id >= ? AND (sender_id = ? OR recipient_id = ?) ORDER BY id DESC LIMIT ?"
                )
                args += [k, top, low, participant, participant, limit + 1]
        elif kind is not None:
            arms.append("SELECT id FROM interactions WHERE kind = ? AND id < ? ORDER BY id DESC LIMIT ?")
            args += [kind.value, top, limit + 1]
        else:
            arms.append("SELECT id FROM interactions WHERE id < ? ORDER BY id DESC LIMIT ?")
            args += [top, limit + 1]
        ids = " UNION ".join(f"SELECT id FROM ({arm}) AS arm{n}" for n, arm in enumerate(arms))
        rows = self._db.execute(
            "SELECT i.id, i.public_id, i.kind, i.sender_id, i.recipient_id, substr(i.body, 1, ?), length(i.body), "
            "i.created_at, i.request_id, i.status, i.acked_at, i.received_at, i.push_state, i.provider_delivered_at, "
            f"i.push_note, t.uncertain_reason, t.{TASK_FACT_COLS.replace(', ', ', t.')} "
            f"FROM interactions i LEFT JOIN tasks t ON t.interaction_id = i.id WHERE i.id IN ({ids}) "
            "ORDER BY i.id DESC LIMIT ?", (EXCHANGE_PREVIEW_CHARS, *args, limit + 1)).fetchall()
        more = len(rows) > limit
        parties: dict[int, Party] = {}
        records: list[ExchangeRecord] = []
        for r in rows[:limit]:
            recipient = self._party_by_id(r[4], parties)
            assert recipient is not None
            interaction = Interaction(r[1], KINDS[r[2]], self._party_by_id(r[3], parties), recipient, r[5], r[7], r[8],
                                      STATUSES[r[9]], r[10] is not None)
            delivery = RecordDelivery(r[11], r[10], r[12], r[13] if r[12] in ("done", "uncertain") else None, r[14])
            records.append(ExchangeRecord(r[0], interaction, r[6], delivery,
                                          facts_of(r[16:]) if r[16] is not None else None, r[15]))
        if more:
            return ExchangePage(tuple(records), records[-1].seq)
        if low > 1:
            return ExchangePage(tuple(records), low, searched_to=low)  # the window ended the page: go on below it
        return ExchangePage(tuple(records), None)

    def request_trace(self, public_id: str) -> RequestTrace:
        """Raises: UnknownRequest (no record has that id)."""
        story = self.record_story(public_id)
        if story.interaction.kind is not InteractionKind.TASK and story.interaction.request_id is not None:
            story = self.record_story(story.interaction.request_id)  # a reply or notice: the task it answers
        answer = story.answer
        answer_story = self.record_story(answer.id) if answer is not None else None
        interrupts: tuple[InterruptFact, ...] = ()
        turn_tasks: tuple[str, ...] = ()
        turn_id = story.task.facts.turn_id if story.task is not None else None
        if turn_id is not None:
            parties: dict[int, Party] = {}
            rows = self._db.execute("SELECT id, caller_id, target_id, turn_id, created_at FROM interrupts "
                                    "WHERE turn_id = ? ORDER BY id", (turn_id,)).fetchall()
            facts: list[InterruptFact] = []
            for r in rows:
                caller, target = self._party_by_id(r[1], parties), self._party_by_id(r[2], parties)
                assert caller is not None
                assert target is not None
                facts.append(InterruptFact(r[0], caller, target, r[3], r[4]))
            interrupts = tuple(facts)
            turn_tasks = tuple(r[0] for r in self._db.execute(
                "SELECT request_id FROM tasks WHERE turn_id = ? ORDER BY interaction_id", (turn_id,)))
        return RequestTrace(story, answer_story, interrupts, turn_tasks)

    def log_records(self, *, limit: int) -> list[LogRecord]:
        rows = self._db.execute(
            "SELECT i.public_id, i.kind, i.sender_id, i.recipient_id, i.body, i.created_at, i.request_id, i.status, "
            f"i.acked_at, t.{TASK_FACT_COLS.replace(', ', ', t.')} "
            "FROM interactions i LEFT JOIN tasks t ON t.interaction_id = i.id ORDER BY i.id LIMIT ?",
            (limit,)).fetchall()
        parties: dict[int, Party] = {}
        out: list[LogRecord] = []
        for r in rows:
            recipient = self._party_by_id(r[3], parties)
            assert recipient is not None
            interaction = Interaction(r[0], KINDS[r[1]], self._party_by_id(r[2], parties), recipient, r[4], r[5],
                                      r[6], STATUSES[r[7]], r[8] is not None)
            out.append(LogRecord(interaction, facts_of(r[9:]) if r[9] is not None else None))
        return out

    # --- pushes (a record admitted with push=True, hidden from receive until settled here) ----------------

    def claim_push(self, public_id: str) -> bool:
        """Take a record still on the receive path, and never returned by a receive, for a push now (a provider that
        could not push while a turn ran pushes at idle); True when this push owns it."""
        with self.atomic():
            return (
                self._db.execute(
                    "UPDATE interactions SET push_state = 'sending' WHERE public_id = ? AND push_state IS NULL "
                    "AND received_at IS NULL AND acked_at IS NULL AND provider_delivered_at IS NULL AND kind != 'task'",
                    (public_id,),
                ).rowcount
                == 1
            )

    def push_done(self, public_id: str) -> None:
        with self.atomic():
            self._db.execute(
                "UPDATE interactions SET push_state = 'done', provider_delivered_at = ? "
                "WHERE public_id = ? AND push_state = 'sending'",
                (now_ms(), public_id),
            )

    def push_released(self, public_id: str) -> None:
        with self.atomic():
            self._db.execute(
                "UPDATE interactions SET push_state = NULL WHERE public_id = ? AND push_state = 'sending'", (public_id,)
            )

    def push_uncertain(self, public_id: str, reason: str) -> None:
        with self.atomic():
            self._db.execute(
                "UPDATE interactions SET push_state = 'uncertain', push_note = ?, "
                "provider_delivered_at = ? WHERE public_id = ? AND push_state = 'sending'",
                (reason, now_ms(), public_id),
            )

    def pushes_interrupted(self, reason: str) -> list[str]:
        mine, args = self._mine("recipient_id")
        with self.atomic():
            ids = [
                r[0]
                for r in self._db.execute(
                    f"SELECT public_id FROM interactions WHERE push_state = 'sending'{mine} ORDER BY id", args
                )
            ]
            self._db.execute(
                "UPDATE interactions SET push_state = 'uncertain', push_note = ?, "
                f"provider_delivered_at = ? WHERE push_state = 'sending'{mine}",
                (reason, now_ms(), *args),
            )
        return ids

    def take_unseen_context(self, agent_id: int) -> bool:
        with self.atomic():
            row = self._db.execute(
                "SELECT max(i.id) FROM interactions i JOIN agents a ON a.id = i.recipient_id WHERE i.recipient_id = ? "
                "AND i.provider_delivered_at IS NOT NULL AND i.kind != 'task' AND i.id > a.context_seen_id",
                (agent_id,)).fetchone()
            if row[0] is None:
                return False
            self._db.execute("UPDATE agents SET context_seen_id = ? WHERE id = ?", (row[0], agent_id))
            return True

    # --- cursors --------------------------------------------------------------------------------------

    def encode_cursor(self, recipient_id: int, start: int, end: int) -> str:
        payload = _CURSOR_STRUCT.pack(self.epoch, recipient_id, start, end)
        mac = hmac.new(self._cursor_key, payload, hashlib.sha256).digest()[:_MAC_BYTES]
        return CURSOR_PREFIX + base64.urlsafe_b64encode(payload + mac).rstrip(b"=").decode("ascii")

    def decode_cursor(self, cursor: str, recipient_id: int, field: str) -> tuple[int, int]:
        """The (start, end] id range of a batch this store returned to `recipient_id`.

        Raises:
            InvalidCursor: malformed, truncated, a bad MAC, or another recipient's cursor.
            StaleCursor: a cursor of a previous store (the database was recreated).
        """
        invalid = errors.InvalidCursor(
            f"{field} is not a cursor this mailbox returned; pass a cursor from an earlier receive of "
            "this same caller, or omit it", field=field)
        if not cursor.startswith(CURSOR_PREFIX):
            raise invalid
        body = cursor[len(CURSOR_PREFIX):]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, TypeError):
            raise invalid from None
        if len(raw) != _CURSOR_STRUCT.size + _MAC_BYTES:
            raise invalid
        payload, mac = raw[:_CURSOR_STRUCT.size], raw[_CURSOR_STRUCT.size:]
        epoch, owner, start, end = _CURSOR_STRUCT.unpack(payload)
        if epoch != self.epoch:
            raise errors.StaleCursor(
                f"{field} comes from an earlier store of this home; receive again without a cursor", field=field)
        expected = hmac.new(self._cursor_key, payload, hashlib.sha256).digest()[:_MAC_BYTES]
        if not hmac.compare_digest(mac, expected) or owner != recipient_id or start >= end:
            raise invalid
        return start, end
