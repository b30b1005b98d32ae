"""The shared backend: PostgreSQL (psycopg 3), for agents on several machines (#15).

The operations are the same modules as the embedded store's (`roster`, `mailbox`, `ledger`, `hosts`); this module
provides the connection, the transaction rules and the error mapping.

Invariants:
- Every change runs inside `atomic()` (BEGIN, SAVEPOINT when nested) or a batch (one BEGIN, a SAVEPOINT per
  operation, one COMMIT: group commit, as on SQLite). `synchronous_commit` is `on` for this session, so a COMMIT
  returns once the WAL is flushed on the primary (and on synchronous standbys, when the operator configured them).
- A caller learns an outcome only after COMMIT returned. A COMMIT whose answer is lost (the connection broke) has an
  unknown outcome: every write of that batch is reported `uncertain`, never admitted and never refused.
- Mailbox order is commit order: before its first write, every transaction takes one transaction-scoped advisory
  lock (`APPEND_LOCK`), so identity values are handed out and committed in the same order on every host and a
  receive can never pass a record a slower transaction is still writing below it. Reads take no lock. With that
  lock first, before any row lock, writers cannot deadlock.
- Nothing of the roster is cached: other apps change it (a session revoked on another host must be refused here).
- A broken connection is replaced at the next operation, with a bounded backoff; psycopg errors become storage
  errors here; nothing psycopg-specific leaves the store. No credential is ever in an error or a log line: the
  URL's password is refused before connecting (`check_store_url`) and libpq reads it from PGPASSFILE/PGSERVICE.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, LiteralString, cast

import psycopg
import psycopg.errors as pge
from psycopg import pq

from wardian import errors
from wardian.store.api import BatchResult, InterruptAnnounced, RecordAnnounced, Resynced, Store, StoreEvent
from wardian.store.hosts import HostOps
from wardian.store.ledger import TaskLedgerOps
from wardian.store.mailbox import MailboxOps
from wardian.store.pg_schema import APPEND_LOCK, CHANNEL, MIGRATE_LOCK, PG_MIGRATIONS
from wardian.store.roster import RosterOps
from wardian.store.url import check_store_url, redact_url

log = logging.getLogger("wardian.store.postgres")

IDLE_IN_TRANSACTION_MS = 10_000
LOCK_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
_WRITES = ("INSERT", "UPDATE", "DELETE")


class _NoCache(dict[Any, Any]):
    """A roster cache that keeps nothing: on a shared store other apps change the roster under us."""

    def __setitem__(self, key: Any, value: Any) -> None:
        return None


class _PgDb:
    """What the operations call `_db`: `?` placeholders, the append lock before a transaction's first write."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.wrote = False  # this transaction has taken the append lock (and written)
        self._sql: dict[str, str] = {}

    def _query(self, sql: str) -> str:
        query = self._sql.get(sql)
        if query is None:
            # Our statements hold no `?` or `%` inside string literals, so a plain replacement is exact.
            query = self._sql[sql] = sql.replace("%", "%%").replace("?", "%s")
        return query

    def _before(self, sql: str) -> None:
        if not self.wrote and sql.lstrip()[:6].upper() in _WRITES:
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
            self.wrote = True

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        self._before(sql)
        return self.conn.execute(self._query(sql), parameters)  # type: ignore[arg-type]  # our own SQL text

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any:
        self._before(sql)
        with self.conn.cursor() as cur:
            cur.executemany(self._query(sql), parameters)  # type: ignore[arg-type]  # our own SQL text
            return cur


def _storage_error(exc: psycopg.Error) -> errors.WardianError:
    """The storage error for a psycopg failure; its text carries no credential (libpq never prints passwords)."""
    if isinstance(exc, pge.DiskFull):
        return errors.StorageFull("the shared store's disk is full; nothing was admitted")
    if isinstance(exc, pge.DataCorrupted | pge.IndexCorrupted):
        return errors.StoreCorrupt(f"the shared store reports corruption: {exc}")
    return errors.StorageUnavailable(f"the shared store cannot be used: {str(exc).strip()[:300]}")


class PostgresStore(HostOps, RosterOps, MailboxOps, TaskLedgerOps):
    """Synchronous access to one shared store (implements `wardian.store.api.Store`). One caller at a time."""

    inline_statements = False  # every statement is a round trip: the app's writer runs batches on a worker thread

    def __init__(self, url: str, conn: psycopg.Connection[Any], epoch: bytes, cursor_key: bytes) -> None:
        self._url = url
        self._conn = conn
        self._db = _PgDb(conn)  # type: ignore[assignment]  # speaks the operations' `Db`
        self.epoch = epoch
        self._cursor_key = cursor_key
        self._depth = 0
        self._sessions = _NoCache()
        self._targets = _NoCache()
        self._next_connect = 0.0
        self._backoff = BACKOFF_FIRST_S
        self.backend_pids: set[int] = {conn.info.backend_pid}  # every connection this store wrote through

    # --- lifecycle ------------------------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> PostgresStore:
        """Connect, migrate (under the migration lock) when `migrate`, and load the store's keys.

        Raises:
            InvalidArguments: the URL is not a PostgreSQL URL, or holds a password.
            StorageUnavailable: no connection, or the schema is newer than this wardian (or missing, without
                `migrate`).
        """
        check_store_url(url)
        conn = _connect(url)
        try:
            version = _migrate(conn) if migrate else _schema_version(conn)
            if version != len(PG_MIGRATIONS):
                raise errors.StorageUnavailable(
                    f"the shared store {redact_url(url)} has schema version {version}, this wardian needs "
                    f"{len(PG_MIGRATIONS)}; run `wardian store migrate --store URL`",
                    field="store",
                )
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except psycopg.Error as exc:
            conn.close()
            raise _storage_error(exc) from None
        except BaseException:
            conn.close()
            raise
        return cls(url, conn, bytes(meta["epoch"]), bytes(meta["cursor_key"]))

    def close(self) -> None:
        with suppress(psycopg.Error):
            self._conn.close()

    def announcements(self) -> Announcements:
        """The stream of what other apps commit (see `Announcements`)."""
        return Announcements(self._url, lambda: self.backend_pids)

    def integrity_check(self) -> str:
        with self._errors():
            self._conn.execute("SELECT count(*) FROM interactions")
        return "ok"

    @property
    def schema_version(self) -> int:
        with self._errors():
            return _schema_version(self._conn)

    def _clock_ms(self) -> int:
        with self._errors():
            row = self._conn.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint").fetchone()
        assert row is not None
        return int(row[0])

    # --- the connection -------------------------------------------------------------------------------

    @property
    def _broken(self) -> bool:
        return self._conn.closed or self._conn.pgconn.status != pq.ConnStatus.OK

    def _ensure_connected(self) -> None:
        """Replace a broken connection, at most once per backoff interval (0.1 s doubling to 5 s).

        Raises: StorageUnavailable (still no connection)."""
        if not self._broken:
            return
        now = time.monotonic()
        if now < self._next_connect:
            raise errors.StorageUnavailable("the shared store is unreachable; reconnecting (nothing was admitted)")
        try:
            conn = _connect(self._url)
        except errors.StorageUnavailable:
            self._next_connect = now + self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
            raise
        with suppress(psycopg.Error):
            self._conn.close()
        self._conn = conn
        self._db = _PgDb(conn)  # type: ignore[assignment]
        self._backoff = BACKOFF_FIRST_S
        self.backend_pids.add(conn.info.backend_pid)
        log.info("reconnected to the shared store %s", redact_url(self._url))

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            raise _storage_error(exc) from None

    def _begin(self) -> None:
        self._ensure_connected()
        self._conn.execute("BEGIN")
        self._db.wrote = False  # type: ignore[attr-defined]

    def _rollback(self) -> None:
        if not self._broken:
            with suppress(psycopg.Error):
                self._conn.execute("ROLLBACK")

    # --- transactions ---------------------------------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction or, nested, one savepoint."""
        with self._errors():
            if self._depth == 0:
                self._begin()
            else:
                self._conn.execute(_q(f"SAVEPOINT sp{self._depth}"))
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            if self._depth == 0:
                self._rollback()
            elif not self._broken:
                with suppress(psycopg.Error):
                    self._conn.execute(_q(f"ROLLBACK TO SAVEPOINT sp{self._depth}"))
                    self._conn.execute(_q(f"RELEASE SAVEPOINT sp{self._depth}"))
            raise
        self._depth -= 1
        with self._errors():
            if self._depth == 0:
                wrote = self._db.wrote  # type: ignore[attr-defined]
                try:
                    self._conn.execute("COMMIT")
                except psycopg.Error as exc:
                    if wrote and self._broken:
                        raise _commit_lost(exc) from None
                    self._rollback()
                    raise
            else:
                self._conn.execute(_q(f"RELEASE SAVEPOINT sp{self._depth}"))

    def run_batch(self, ops: Sequence[Callable[[Store], Any]], bare: Sequence[bool] | None = None) -> list[BatchResult]:
        return self.commit_batch(self.begin_batch(ops, bare))

    def begin_batch(
        self, ops: Sequence[Callable[[Store], Any]], bare: Sequence[bool] | None = None
    ) -> list[BatchResult]:
        """BEGIN, then each op in its own savepoint (or none, `bare`); `commit_batch` ends it."""
        try:
            with self._errors():
                self._begin()
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in ops]
        self._depth = 1
        results: list[BatchResult] = []
        try:
            for i, op in enumerate(ops):
                try:
                    if bare is not None and bare[i]:
                        with self._errors():
                            value = op(self)
                    else:
                        with self.atomic():
                            value = op(self)
                except Exception as exc:
                    if self._broken or self._conn.info.transaction_status == pq.TransactionStatus.INERROR:
                        # The connection broke (or the transaction is aborted): nothing of the batch stands.
                        self._depth = 0
                        self._rollback()
                        error = exc if isinstance(exc, errors.WardianError) else errors.StorageUnavailable(str(exc))
                        return [BatchResult(None, error) for _ in ops]
                    results.append(BatchResult(None, exc))
                else:
                    results.append(BatchResult(value, None))
        except BaseException:
            self._depth = 0
            self._rollback()
            raise
        return results

    @property
    def batch_wrote(self) -> bool:
        return self._depth > 0 and bool(self._db.wrote)  # type: ignore[attr-defined]

    def commit_batch(self, results: list[BatchResult]) -> list[BatchResult]:
        """COMMIT the open batch. A failed COMMIT fails every operation; a lost answer to it makes every operation
        of a batch that wrote `uncertain` (it may or may not have been committed)."""
        if self._depth == 0:
            return results
        self._depth = 0
        wrote = bool(self._db.wrote)  # type: ignore[attr-defined]
        try:
            self._conn.execute("COMMIT")
        except psycopg.Error as exc:
            if wrote and self._broken:
                lost = _commit_lost(exc)
                return [BatchResult(None, lost) for _ in results]
            self._rollback()
            error = _storage_error(exc)
            return [BatchResult(None, error) for _ in results]
        return results


class Announcements:
    """What other apps commit, as it is committed: LISTEN on the store's channel from a connection of its own.

    `events()` yields `Resynced` on every (re)connection (announcements before it may be lost: re-read durable
    state), then each `RecordAnnounced` / `InterruptAnnounced`, skipping those sent by `own_pids()` (this app's
    writer connections: the app acted on its own commits already). A broken connection is replaced after a bounded
    backoff (0.1 s doubling to 5 s); a quiet one is probed every `probe_s` so a dead server is noticed.
    """

    def __init__(self, url: str, own_pids: Callable[[], set[int]], *, probe_s: float = 10.0) -> None:
        self._url = url
        self._own = own_pids
        self._probe_s = probe_s

    async def events(self) -> AsyncIterator[StoreEvent]:
        backoff = BACKOFF_FIRST_S
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name="wardian listen"
                )
            except psycopg.Error as exc:
                log.warning(
                    "cannot listen to the shared store %s (%s); retrying in %.1f s",
                    redact_url(self._url),
                    type(exc).__name__,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            backoff = BACKOFF_FIRST_S
            try:
                async with conn:
                    await conn.execute(_q(f"LISTEN {CHANNEL}"))
                    yield Resynced()
                    while True:
                        async for note in conn.notifies(timeout=self._probe_s):
                            if note.pid in self._own():
                                continue
                            event = _announcement(note.payload)
                            if event is not None:
                                yield event
                        await conn.execute("SELECT 1")  # quiet for a while: is the server still there?
            except psycopg.Error as exc:
                log.warning("the shared store's announcements stopped (%s); listening again", type(exc).__name__)
                await asyncio.sleep(BACKOFF_FIRST_S)


def _announcement(payload: str) -> StoreEvent | None:
    try:
        data = json.loads(payload)
        if data["e"] == "record":
            return RecordAnnounced(str(data["to"]), data.get("host"), str(data["id"]), str(data["k"]))
        if data["e"] == "interrupt":
            return InterruptAnnounced(str(data["to"]), data.get("host"), int(data["id"]), str(data["turn"]))
    except (ValueError, KeyError, TypeError):
        pass
    log.warning("an announcement of the shared store could not be read: %.200s", payload)
    return None


def _q(text: str) -> LiteralString:
    """A statement this module builds from its own constants (savepoint names, the channel): never outside text."""
    return cast("LiteralString", text)


def _commit_lost(exc: psycopg.Error) -> errors.DeliveryUncertain:
    return errors.DeliveryUncertain(
        "the shared store's answer to COMMIT was lost (the connection broke): this may or may not have been "
        f"stored; it is not retried ({type(exc).__name__})"
    )


def _connect(url: str) -> psycopg.Connection[Any]:
    """A connection in autocommit mode (transactions are explicit) with synchronous_commit on.

    Raises: StorageUnavailable (the message names the server, never a credential)."""
    try:
        conn = psycopg.connect(
            url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name="wardian app", prepare_threshold=5
        )
    except psycopg.Error as exc:
        raise errors.StorageUnavailable(
            f"cannot connect to the shared store {redact_url(url)}: {str(exc).strip()[:300]}", field="store"
        ) from None
    try:
        conn.execute("SET synchronous_commit TO on")
        # A stalled app (stopped, partitioned) must not hold the append lock for every host: the server ends its
        # session after IDLE_IN_TRANSACTION_MS idle inside a transaction (the COMMIT it may still send is then
        # refused, and reported uncertain), and a writer waits at most LOCK_TIMEOUT_MS for a lock
        # (storage_unavailable: nothing was admitted).
        conn.execute(_q(f"SET idle_in_transaction_session_timeout TO {IDLE_IN_TRANSACTION_MS}"))
        conn.execute(_q(f"SET lock_timeout TO {LOCK_TIMEOUT_MS}"))
    except psycopg.Error as exc:
        conn.close()
        raise _storage_error(exc) from None
    return conn


def migrate_store(url: str) -> tuple[int, int]:
    """`wardian store migrate`: bring the shared store at `url` to this wardian's schema; returns (before, after).

    Raises:
        InvalidArguments: the URL is refused (see `check_store_url`).
        StorageUnavailable: no connection, or the schema is newer than this wardian.
    """
    check_store_url(url)
    conn = _connect(url)
    try:
        before = _schema_version(conn)
        return before, _migrate(conn)
    except psycopg.Error as exc:
        raise _storage_error(exc) from None
    finally:
        conn.close()


def _schema_version(conn: psycopg.Connection[Any]) -> int:
    exists = conn.execute("SELECT to_regclass('wardian_schema') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.execute("SELECT max(version) FROM wardian_schema").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _migrate(conn: psycopg.Connection[Any]) -> int:
    """Bring the schema to this wardian's version under the migration lock; returns the version.

    Raises: StorageUnavailable (the schema is newer than this wardian)."""
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS wardian_schema (version INTEGER PRIMARY KEY, applied_at BIGINT)")
        version = _schema_version(conn)
        if version > len(PG_MIGRATIONS):
            raise errors.StorageUnavailable(
                f"the shared store has schema version {version}, newer than this wardian understands "
                f"({len(PG_MIGRATIONS)}); upgrade wardian",
                field="store",
            )
        for number in range(version + 1, len(PG_MIGRATIONS) + 1):
            with conn.transaction():
                conn.execute(PG_MIGRATIONS[number - 1])  # type: ignore[arg-type]  # our own schema text
                if number == 1:
                    conn.execute(
                        "INSERT INTO meta (key, value) VALUES ('epoch', %s), ('cursor_key', %s)",
                        (secrets.token_bytes(8), secrets.token_bytes(32)),
                    )
                conn.execute(
                    "INSERT INTO wardian_schema (version, applied_at) VALUES "
                    "(%s, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
                    (number,),
                )
            log.info("shared store migrated to schema version %d", number)
        return len(PG_MIGRATIONS) if version <= len(PG_MIGRATIONS) else version
    finally:
        with suppress(psycopg.Error):
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
