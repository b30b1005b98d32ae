"""The interaction store: SQLite in WAL mode with synchronous=FULL, written by the app alone.

Invariants:
- Every change runs inside `atomic()`: `BEGIN IMMEDIATE` at the outside (so a read-then-write never meets
  SQLITE_BUSY half-way), a SAVEPOINT when nested. `run_batch` wraps many operations in one transaction, each
  in its own savepoint, so one failing operation never takes its neighbours down (group commit).
- A caller learns an outcome only after COMMIT returned: an acknowledged record survives `kill -9`.
- Claims and acknowledgements are conditional UPDATEs checked by rowcount, so exactly one claimer wins.
- Text is stored exactly as given; nothing here trims, normalises or re-encodes it.
- The store speaks records (`wardian.model`) and domain errors (`wardian.errors`), never sqlite rows.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import sqlite3
import struct
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from wardian import errors
from wardian.faults import crashpoint
from wardian.model import (
    ID_PREFIX,
    MAX_PAGE_TEXT_BYTES,
    Agent,
    AgentStatus,
    Caller,
    ClaimKind,
    Interaction,
    InteractionKind,
    InterruptReceipt,
    Party,
    Receipt,
    ReceivedRecord,
    ReceivePage,
    ReplyReceipt,
    ReplyStatus,
    TaskFacts,
    TaskState,
)
from wardian.store.migrations import MIGRATIONS

T = TypeVar("T")

SESSION_PREFIX = "wsn1"
CURSOR_PREFIX = "cur1_"
_CURSOR_STRUCT = struct.Struct(">8sQQQ")  # epoch, recipient agent id, start (exclusive), end (inclusive)
_MAC_BYTES = 16
_MAX_CACHED_TARGETS = 4096
_INSERT_INTERACTION = ("INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, request_id, "
                       "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_public_id(kind: InteractionKind) -> str:
    """A kind-prefixed, time-ordered, unguessable id (`ask_…` for tasks)."""
    return f"{ID_PREFIX[kind]}_{now_ms():011x}{secrets.token_hex(8)}"


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The outcome of one operation of a batch: exactly one of `value` and `error` is meaningful."""

    value: Any
    error: BaseException | None


@contextmanager
def _map_sqlite_errors() -> Iterator[None]:
    """Translate sqlite3 failures into storage errors; nothing sqlite-specific leaves the store."""
    try:
        yield
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary == sqlite3.SQLITE_FULL:
            raise errors.StorageFull("the store's disk or page limit is full; nothing was admitted") from exc
        if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            raise errors.StoreCorrupt(f"the store is corrupt: {exc}") from exc
        raise errors.StorageUnavailable(f"the store cannot be written: {exc}") from exc


class InteractionStore:
    """Synchronous access to one home's `wardian.db`.

    Not thread-safe: one caller at a time (the app's writer, which may run a batch's COMMIT on a worker thread).
    """

    def __init__(self, conn: sqlite3.Connection, epoch: bytes, cursor_key: bytes) -> None:
        self._conn = conn
        self.epoch = epoch
        self._cursor_key = cursor_key
        self._depth = 0
        self._batch_changes = 0
        self._path: str | None = None
        self._identity: tuple[int, int] = (0, 0)
        # Roster caches (#2: authenticate + resolve were two queries and ~40 µs of every send). Valid for
        # what this connection sees: a TEMP trigger on every write to agents or sessions clears them, and so
        # does every rollback (a cache filled inside a transaction that did not commit must not outlive it).
        self._sessions: dict[int, tuple[bytes, Caller]] = {}
        self._targets: dict[str, tuple[Agent, ...]] = {}
        conn.create_function("wardian_roster_changed", 0, self._roster_changed)
        for table in ("agents", "sessions"):
            for event in ("INSERT", "UPDATE", "DELETE"):
                conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS roster_{table}_{event.lower()} AFTER {event} "
                             f"ON main.{table} BEGIN SELECT wardian_roster_changed(); END")

    # --- lifecycle ------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> InteractionStore:
        """Open (creating and migrating when needed) the store at `path`.

        Raises:
            StorageUnavailable, StorageFull, StoreCorrupt: the file cannot be opened or migrated.
        """
        with _map_sqlite_errors():
            conn = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False,
                                   cached_statements=256)
            try:
                conn.execute("PRAGMA busy_timeout = 5000")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise errors.StorageUnavailable(f"the store could not enter WAL mode (got {mode!r})")
                # FULL: a receipt is a durability promise across OS crash and power loss, not only
                # across an app crash (reliability-matrix Part 4, decision 1).
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
                _migrate(conn)
                epoch, key = _load_meta(conn)
            except BaseException:
                conn.close()
                raise
        store = cls(conn, epoch, key)
        store._path = os.fspath(path)
        st = os.stat(store._path)
        store._identity = (st.st_dev, st.st_ino)
        return store

    def _check_file_identity(self) -> None:
        """Refuse to COMMIT when wardian.db was removed or replaced under the open connection: SQLite would
        go on committing to the unlinked inode, and a receipt would be a lie the next start cannot see."""
        if self._path is None:
            return
        try:
            st = os.stat(self._path)
            wal_present = os.path.exists(self._path + "-wal")
        except OSError:
            st, wal_present = None, False
        if st is None or (st.st_dev, st.st_ino) != self._identity or not wal_present:
            raise errors.StorageUnavailable(
                f"the store file {self._path} was removed or replaced while the app ran; nothing was admitted. "
                "Stop the app, restore the home, and start it again")

    def close(self) -> None:
        self._conn.close()

    @property
    def home_tag(self) -> str:
        """A short public tag of this store, embedded in session tokens to spot another home's token."""
        return self.epoch.hex()[:8]

    def integrity_check(self) -> str:
        with _map_sqlite_errors():
            return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    def set_max_page_count(self, pages: int) -> int:
        """Test hook for storage-full faults (reliability-matrix D5)."""
        with _map_sqlite_errors():
            return int(self._conn.execute(f"PRAGMA max_page_count = {int(pages)}").fetchone()[0])

    # --- roster caches --------------------------------------------------------------------------------

    def _roster_changed(self) -> None:
        self._sessions.clear()
        self._targets.clear()

    def _rolled_back(self) -> None:
        """Called on every path that ends a transaction or savepoint without COMMIT/RELEASE."""
        self._roster_changed()

    # --- transactions ---------------------------------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """One transaction (BEGIN IMMEDIATE) or, nested, one savepoint."""
        conn = self._conn
        with _map_sqlite_errors():
            if self._depth == 0:
                conn.execute("BEGIN IMMEDIATE")
            else:
                conn.execute(f"SAVEPOINT sp{self._depth}")
            self._depth += 1
            try:
                yield conn
            except BaseException:
                self._depth -= 1
                self._rolled_back()
                # SQLite may already have rolled the whole transaction back (SQLITE_FULL, IOERR): then
                # there is nothing left to undo, and the original error is the one that matters.
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        if self._depth == 0:
                            conn.execute("ROLLBACK")
                        else:
                            conn.execute(f"ROLLBACK TO sp{self._depth}")
                            conn.execute(f"RELEASE sp{self._depth}")
                raise
            self._depth -= 1
            if self._depth == 0:
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error:
                    self._rolled_back()
                    if conn.in_transaction:
                        with suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            else:
                conn.execute(f"RELEASE sp{self._depth}")

    def run_batch(self, ops: Sequence[Callable[[InteractionStore], Any]],
                  bare: Sequence[bool] | None = None) -> list[BatchResult]:
        """Run `ops` in one transaction (group commit): each in its own savepoint, one COMMIT for all.

        If the COMMIT itself fails, every operation of the batch fails with that storage error: nothing of
        the batch was committed, so nothing is reported as admitted.
        """
        return self.commit_batch(self.begin_batch(ops, bare))

    def begin_batch(self, ops: Sequence[Callable[[InteractionStore], Any]],
                    bare: Sequence[bool] | None = None) -> list[BatchResult]:
        """`run_batch` up to its COMMIT: BEGIN IMMEDIATE, then each op in its own savepoint.

        `bare[i]` runs op i without a savepoint of its own: only for an op whose writes all happen in one
        store method (which is atomic by itself) after its reads, so a failure leaves nothing behind
        (saves two statements per op on the send path, #2).

        The transaction stays open for `commit_batch`, which the app runs on another thread when the batch
        wrote something (`batch_wrote`), so the fsync does not hold its event loop. The results are final
        only once `commit_batch` returned them. If SQLite aborted the whole transaction (SQLITE_FULL, IOERR),
        every result already carries that error and no transaction is left open.
        """
        conn = self._conn
        self._batch_changes = conn.total_changes
        try:
            with _map_sqlite_errors():
                conn.execute("BEGIN IMMEDIATE")
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in ops]
        self._depth = 1
        results: list[BatchResult] = []
        try:
            for i, op in enumerate(ops):
                try:
                    if bare is not None and bare[i]:
                        with _map_sqlite_errors():
                            value = op(self)
                    else:
                        with self.atomic():
                            value = op(self)
                except Exception as exc:
                    if not conn.in_transaction:
                        # SQLite rolled the whole batch back (e.g. SQLITE_FULL): nothing of it stands.
                        self._depth = 0
                        self._rolled_back()
                        return [BatchResult(None, exc) for _ in ops]
                    results.append(BatchResult(None, exc))
                else:
                    results.append(BatchResult(value, None))
        except BaseException:
            self._depth = 0
            self._rolled_back()
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        return results

    @property
    def batch_wrote(self) -> bool:
        """Whether the open batch changed any row (its COMMIT then appends to the WAL and fsyncs it)."""
        return self._conn.in_transaction and self._conn.total_changes != self._batch_changes

    def commit_batch(self, results: list[BatchResult]) -> list[BatchResult]:
        """COMMIT the batch `begin_batch` left open and return its final results.

        If the COMMIT fails, every operation fails with that storage error (nothing of the batch stands).
        """
        if self._depth == 0:
            return results  # begin_batch failed or SQLite aborted the batch: the errors are in `results`
        self._depth = 0
        try:
            with _map_sqlite_errors():
                try:
                    if self.batch_wrote:
                        self._check_file_identity()  # a read-only batch promises nothing
                    self._conn.execute("COMMIT")
                except (sqlite3.Error, errors.WardianError):
                    self._rolled_back()
                    if self._conn.in_transaction:
                        with suppress(sqlite3.Error):
                            self._conn.execute("ROLLBACK")
                    raise
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in results]
        return results

    # --- agents and sessions --------------------------------------------------------------------------

    def add_agent(self, name: str, provider: str, workspace: str | None) -> Agent:
        with self.atomic() as conn:
            agent_uuid = str(uuidlib.uuid4())
            created = now_ms()
            cur = conn.execute(
                "INSERT INTO agents (uuid, name, provider, workspace, created_at) VALUES (?, ?, ?, ?, ?)",
                (agent_uuid, name, provider, workspace, created),
            )
            agent_id = cur.lastrowid
            assert agent_id is not None
        return self.agent(agent_id)

    def agent(self, agent_id: int) -> Agent:
        row = self._conn.execute(f"SELECT {_AGENT_COLS} FROM agents WHERE id = ?", (agent_id,)).fetchone()
        if row is None:
            raise errors.UnknownAgent(f"no agent with id {agent_id}")
        return _agent(row)

    def list_agents(self) -> list[Agent]:
        rows = self._conn.execute(
            f"SELECT {_AGENT_COLS} FROM agents WHERE removed_at IS NULL ORDER BY name, created_at, id"
        ).fetchall()
        return [_agent(r) for r in rows]

    def find_agents(self, name_or_uuid: str) -> list[Agent]:
        """Agents whose UUID (exact, canonical lowercase) or name (exact) is `name_or_uuid`."""
        found = self._targets.get(name_or_uuid)
        if found is None:
            rows = self._conn.execute(
                f"SELECT {_AGENT_COLS} FROM agents WHERE removed_at IS NULL AND (uuid = ?1 OR name = ?1) "
                "ORDER BY created_at, id",
                (name_or_uuid,),
            ).fetchall()
            found = tuple(_agent(r) for r in rows)
            if len(self._targets) >= _MAX_CACHED_TARGETS:
                self._targets.clear()  # names that match nobody must not grow it without bound
            self._targets[name_or_uuid] = found
        return list(found)

    def resolve_agent(self, name_or_uuid: str) -> Agent:
        """The one agent named or identified by `name_or_uuid` (operator commands).

        Raises:
            UnknownAgent: nobody has that name or UUID.
            AmbiguousTarget: the name is shared; the error lists the candidates' UUIDs.
        """
        found = self.find_agents(name_or_uuid)
        if not found:
            raise errors.UnknownAgent(f"no agent is named {name_or_uuid!r} and no agent has that UUID",
                                      field="agent")
        if len(found) > 1:
            raise errors.AmbiguousTarget(
                f"{len(found)} agents are named {name_or_uuid!r}; use one of their UUIDs",
                field="agent", candidates=[a.uuid for a in found])
        return found[0]

    def resolve_target(self, caller: Caller, target: str) -> Agent:
        """The exact recipient of a caller's message or task.

        Raises:
            UnknownTarget, AmbiguousTarget, InvalidTarget (the caller itself).
        """
        found = self.find_agents(target)
        if not found:
            raise errors.UnknownTarget(
                f"no agent is named {target[:80]!r} and no agent has that UUID (UUIDs are matched in their "
                "canonical lowercase form; names exactly, case-sensitively)", field="target")
        if len(found) > 1:
            raise errors.AmbiguousTarget(
                f"{len(found)} agents are named {target!r}; address one of them by UUID",
                field="target", candidates=[a.uuid for a in found])
        agent = found[0]
        if agent.id == caller.agent.id:
            raise errors.InvalidTarget("the target is the caller itself; address another agent",
                                       field="target")
        return agent

    def create_session(self, agent_id: int) -> str:
        """Issue a new session token for the agent's current generation; only its hash is kept."""
        with self.atomic() as conn:
            agent = self.agent(agent_id)
            secret = secrets.token_bytes(32)
            cur = conn.execute(
                "INSERT INTO sessions (agent_id, generation, secret_hash, created_at) VALUES (?, ?, ?, ?)",
                (agent.id, agent.generation, hashlib.sha256(secret).digest(), now_ms()),
            )
            session_id = cur.lastrowid
        secret_text = base64.urlsafe_b64encode(secret).rstrip(b"=").decode("ascii")
        return f"{SESSION_PREFIX}_{self.home_tag}_{session_id}_{secret_text}"

    def authenticate(self, token: str) -> Caller:
        """The managed caller a session token stands for.

        Raises:
            UnknownSession: not a session of this store, or its agent was removed.
            SessionHomeMismatch: a session token of another WARDIAN_HOME.
            Unauthenticated: the secret part is missing or wrong (one message for both).
        """
        parts = token.split("_")
        if len(parts) < 3 or parts[0] != SESSION_PREFIX or not parts[2].isdigit():
            raise errors.UnknownSession(
                "WARDIAN_SESSION_ID is not a wardian session of this home; print a valid one with "
                "`wardian agent env NAME`")
        if not hmac.compare_digest(parts[1], self.home_tag):
            raise errors.SessionHomeMismatch(
                "WARDIAN_SESSION_ID belongs to another WARDIAN_HOME; set the matching WARDIAN_HOME or "
                "print this home's session with `wardian agent env NAME`")
        session_id = int(parts[2])
        hit = self._sessions.get(session_id)
        if hit is None:
            # One statement for the session and its agent, then kept until the roster changes.
            row = self._conn.execute(_SESSION_SQL, (session_id,)).fetchone()
            if row is None or row[2] is not None or row[3] is not None:
                raise errors.UnknownSession(
                    "WARDIAN_SESSION_ID names no live session of this home; print a valid one with "
                    "`wardian agent env NAME`")
            hit = (bytes(row[1]), Caller(agent=_agent(row[4:]), session_id=session_id, generation=row[0]))
            self._sessions[session_id] = hit
        secret_text = "_".join(parts[3:])
        try:
            secret = base64.urlsafe_b64decode(secret_text + "=" * (-len(secret_text) % 4))
        except (ValueError, TypeError):
            secret = b""
        # The secret is checked on every call, cached or not, in constant time.
        if not hmac.compare_digest(hashlib.sha256(secret).digest(), hit[0]):
            raise errors.Unauthenticated("the session could not be authenticated")
        return hit[1]

    # --- messages and tasks ---------------------------------------------------------------------------

    def admit(self, caller: Caller, recipient: Agent, kind: InteractionKind, text: str) -> Receipt:
        """Commit one information or task record from `caller` to `recipient` (admission)."""
        assert kind in (InteractionKind.INFORMATION, InteractionKind.TASK)
        public_id = new_public_id(kind)
        created = now_ms()
        task = kind is InteractionKind.TASK
        request_id = public_id if task else None
        values = (public_id, kind.value, caller.agent.id, recipient.id, text, request_id, created)
        if task or not self._depth:
            with self.atomic() as conn:
                cur = conn.execute(_INSERT_INTERACTION, values)
                if task:
                    conn.execute(
                        "INSERT INTO tasks (interaction_id, request_id, requester_id, recipient_id, state) "
                        "VALUES (?, ?, ?, ?, 'pending')",
                        (cur.lastrowid, public_id, caller.agent.id, recipient.id),
                    )
                crashpoint("after_insert_before_commit")
        else:
            # One statement inside an open transaction is atomic by itself: no savepoint (#2, send path).
            self._conn.execute(_INSERT_INTERACTION, values)
            crashpoint("after_insert_before_commit")
        return Receipt(interaction_id=public_id, kind=kind, request_id=request_id,
                       sender=_party(caller.agent), recipient=_party(recipient), created_at=created)

    def has_unacked(self, agent_id: int) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM interactions WHERE recipient_id = ? AND acked_at IS NULL "
            "AND provider_delivered_at IS NULL LIMIT 1", (agent_id,)
        ).fetchone()
        return row is not None

    def receive(self, caller: Caller, *, cursor: str | None, ack_cursor: str | None,
                limit: int) -> ReceivePage:
        """Acknowledge `ack_cursor`'s batch, then return the next page after `cursor` (or the oldest).

        Tasks in the page that nobody has claimed are claimed here (claim kind `receive`) and marked
        `new_work`; a task already claimed (by an earlier receive or by dispatch) is returned as a record
        but never as new work again.

        Raises:
            InvalidCursor, StaleCursor: see `decode_cursor`.
        """
        me = caller.agent.id
        after = self.decode_cursor(cursor, me, "cursor")[1] if cursor is not None else 0
        ack_range = self.decode_cursor(ack_cursor, me, "ack_cursor") if ack_cursor is not None else None
        with self.atomic() as conn:
            acked = 0
            now = now_ms()
            if ack_range is not None:
                acked = conn.execute(
                    "UPDATE interactions SET acked_at = ? WHERE recipient_id = ? AND id > ? AND id <= ? "
                    "AND acked_at IS NULL AND provider_delivered_at IS NULL", (now, me, ack_range[0], ack_range[1]),
                ).rowcount
            rows = conn.execute(
                "SELECT id, public_id, kind, sender_id, body, request_id, status, created_at FROM interactions "
                "WHERE recipient_id = ? AND acked_at IS NULL AND provider_delivered_at IS NULL AND id > ? "
                "ORDER BY id LIMIT ?",
                (me, after, limit + 1),
            ).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            page: list[tuple[Any, ...]] = []
            text_bytes = 0
            for row in rows:
                size = len(row[4].encode("utf-8", "surrogatepass"))
                if page and text_bytes + size > MAX_PAGE_TEXT_BYTES:
                    more = True
                    break
                text_bytes += size
                page.append(row)
            parties: dict[int, Party] = {me: _party(caller.agent)}
            records: list[ReceivedRecord] = []
            for row in page:
                facts: TaskFacts | None = None
                new_work = False
                if row[2] == InteractionKind.TASK:
                    new_work = conn.execute(
                        "UPDATE tasks SET state = 'claimed', claimed_by = 'receive', claim_generation = ?, "
                        "claimed_at = ? WHERE interaction_id = ? AND state = 'pending'",
                        (caller.generation, now, row[0]),
                    ).rowcount == 1
                    facts = self._task_facts(row[0])
                records.append(ReceivedRecord(
                    Interaction(row[1], _KINDS[row[2]], self._party_of(row[3], parties), parties[me], row[4],
                                row[7], row[5], _STATUSES[row[6]], False),
                    new_work, facts))
        next_cursor = self.encode_cursor(me, after, page[-1][0]) if page else None
        return ReceivePage(records=tuple(records), cursor=next_cursor, acked=acked, more=more)

    def claim_task(self, request_id: str, by: ClaimKind, generation: int) -> bool:
        """Take the one durable claim of a pending task; True only for the single winner."""
        with self.atomic() as conn:
            return conn.execute(
                "UPDATE tasks SET state = 'claimed', claimed_by = ?, claim_generation = ?, claimed_at = ? "
                "WHERE request_id = ? AND state = 'pending'", (by.value, generation, now_ms(), request_id),
            ).rowcount == 1

    def task(self, request_id: str) -> TaskFacts:
        row = self._conn.execute("SELECT interaction_id FROM tasks WHERE request_id = ?",
                                 (request_id,)).fetchone()
        if row is None:
            raise errors.UnknownRequest(f"no task has request id {request_id[:80]!r}", field="request_id")
        return self._task_facts(row[0])

    def reply(self, caller: Caller, request_id: str, status: ReplyStatus, text: str) -> ReplyReceipt:
        """Complete a task as its assigned recipient, once; the reply goes to the task's requester.

        Raises:
            UnknownRequest, NotATask, NotRecipient, AlreadyCompleted.
        """
        with self.atomic() as conn:
            row = conn.execute(
                "SELECT interaction_id, requester_id, recipient_id, reply_status, reply_id, state "
                "FROM tasks WHERE request_id = ?", (request_id,),
            ).fetchone()
            if row is None:
                other = conn.execute("SELECT kind FROM interactions WHERE public_id = ?",
                                     (request_id,)).fetchone()
                if other is not None:
                    raise errors.NotATask(
                        f"{request_id[:80]!r} is a {other[0]} record, not a task; only an assigned task's "
                        "ask_ request id can be replied to", field="request_id")
                raise errors.UnknownRequest(f"no task has request id {request_id[:80]!r}",
                                            field="request_id")
            if row[2] != caller.agent.id:
                raise errors.NotRecipient("only the task's assigned recipient may reply to it",
                                          field="request_id")
            if row[4] is not None:
                raise errors.AlreadyCompleted(
                    f"the task was already completed with status {row[3]!r}", field="request_id",
                    status=row[3], reply_id=row[4])
            public_id = new_public_id(InteractionKind.REPLY)
            created = now_ms()
            conn.execute(
                "INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, request_id, "
                "status, created_at) VALUES (?, 'reply', ?, ?, ?, ?, ?, ?)",
                (public_id, caller.agent.id, row[1], text, request_id, status.value, created),
            )
            conn.execute(
                "UPDATE tasks SET state = 'completed', completed_at = ?, reply_status = ?, reply_id = ?, "
                "claimed_by = COALESCE(claimed_by, 'reply'), claimed_at = COALESCE(claimed_at, ?), "
                "claim_generation = COALESCE(claim_generation, ?) WHERE interaction_id = ?",
                (created, status.value, public_id, created, caller.generation, row[0]),
            )
            requester = self.agent(row[1])
        return ReplyReceipt(reply_id=public_id, request_id=request_id, status=status,
                            requester=_party(requester), created_at=created)

    def record_interrupt(self, caller: Caller, target: Agent) -> InterruptReceipt:
        """Record an interrupt request against the target's observed active turn.

        Raises:
            NotActive: the target has no observed active turn; nothing is recorded.
        """
        with self.atomic() as conn:
            current = self.agent(target.id)
            if current.status is not AgentStatus.ACTIVE or current.active_turn_id is None:
                raise errors.NotActive(
                    f"agent {current.name!r} has no active turn (status {current.status.value}); nothing "
                    "was interrupted", field="target", status=current.status.value)
            created = now_ms()
            cur = conn.execute(
                "INSERT INTO interrupts (caller_id, target_id, turn_id, state, created_at) "
                "VALUES (?, ?, ?, 'requested', ?)", (caller.agent.id, current.id, current.active_turn_id,
                                                     created))
            assert cur.lastrowid is not None
            return InterruptReceipt(interrupt_id=cur.lastrowid, target=_party(current),
                                    turn_id=current.active_turn_id, created_at=created)

    def interactions(self, *, limit: int = 1000) -> list[Interaction]:
        """Every record, oldest first, acknowledged or not (operator views and evidence)."""
        rows = self._conn.execute(
            "SELECT public_id, kind, sender_id, recipient_id, body, request_id, status, created_at, acked_at "
            "FROM interactions ORDER BY id LIMIT ?", (limit,)).fetchall()
        parties: dict[int, Party] = {}
        return [Interaction(id=r[0], kind=InteractionKind(r[1]), sender=self._party_of(r[2], parties),
                            recipient=self._party_of(r[3], parties) or Party("?", "?"), text=r[4],
                            created_at=r[7], request_id=r[5],
                            status=ReplyStatus(r[6]) if r[6] is not None else None,
                            acked=r[8] is not None)
                for r in rows]

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
                f"{field} comes from an earlier store of this home; receive again without a cursor",
                field=field)
        expected = hmac.new(self._cursor_key, payload, hashlib.sha256).digest()[:_MAC_BYTES]
        if not hmac.compare_digest(mac, expected) or owner != recipient_id or start >= end:
            raise invalid
        return start, end

    # --- internals ------------------------------------------------------------------------------------

    def _party_of(self, agent_id: int | None, cache: dict[int, Party]) -> Party | None:
        if agent_id is None:
            return None
        party = cache.get(agent_id)
        if party is None:
            party = cache[agent_id] = _party(self.agent(agent_id))
        return party

    def _task_facts(self, interaction_id: int) -> TaskFacts:
        r = self._conn.execute(
            "SELECT state, claimed_by, claim_generation, claimed_at, submitted_at, thread_id, turn_id, "
            "uncertain_at, completed_at, reply_status, reply_id FROM tasks WHERE interaction_id = ?",
            (interaction_id,),
        ).fetchone()
        return TaskFacts(state=TaskState(r[0]), claimed_by=ClaimKind(r[1]) if r[1] else None,
                         claim_generation=r[2], claimed_at=r[3], submitted_at=r[4], thread_id=r[5],
                         turn_id=r[6], uncertain_at=r[7], completed_at=r[8],
                         reply_status=ReplyStatus(r[9]) if r[9] else None, reply_id=r[10])


_AGENT_COL_NAMES = ("id", "uuid", "name", "provider", "workspace", "status", "generation", "active_turn_id",
                    "created_at")
_KINDS = {k.value: k for k in InteractionKind}
_STATUSES: dict[str | None, ReplyStatus | None] = {None: None, **{s.value: s for s in ReplyStatus}}

_AGENT_COLS = ", ".join(_AGENT_COL_NAMES)
_SESSION_SQL = ("SELECT s.generation, s.secret_hash, s.revoked_at, a.removed_at, "
                + ", ".join(f"a.{c}" for c in _AGENT_COL_NAMES)
                + " FROM sessions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ?")


def _agent(row: tuple[Any, ...]) -> Agent:
    return Agent(id=row[0], uuid=row[1], name=row[2], provider=row[3], workspace=row[4],
                 status=AgentStatus(row[5]), generation=row[6], active_turn_id=row[7], created_at=row[8])


def _party(agent: Agent) -> Party:
    return Party(name=agent.name, uuid=agent.uuid)


def _migrate(conn: sqlite3.Connection) -> None:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > len(MIGRATIONS):
        raise errors.StorageUnavailable(
            f"the store has schema version {version}, newer than this wardian understands "
            f"({len(MIGRATIONS)}); upgrade wardian")
    for number in range(version + 1, len(MIGRATIONS) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split_sql(MIGRATIONS[number - 1]):
                conn.execute(statement)
            if number == 1:
                conn.execute("INSERT INTO meta (key, value) VALUES ('epoch', ?), ('cursor_key', ?)",
                             (secrets.token_bytes(8), secrets.token_bytes(32)))
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _split_sql(script: str) -> list[str]:
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements


def _load_meta(conn: sqlite3.Connection) -> tuple[bytes, bytes]:
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    return bytes(meta["epoch"]), bytes(meta["cursor_key"])
