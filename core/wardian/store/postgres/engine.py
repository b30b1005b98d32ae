"""The shared engine's hooks: PostgreSQL's transactions through psycopg 3, the append lock, reconnection, and
what a COMMIT whose answer was lost means.

Mailbox order is commit order: before its first write, every transaction takes one transaction-scoped advisory
lock (`APPEND_LOCK`), so identity values are handed out and committed in the same order on every host and a receive
can never pass a record a slower transaction is still writing below it. The parts say which statements write
(`Db.write`); reads take no lock. With that lock first, before any row lock, writers cannot deadlock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterable, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any, LiteralString, cast

import psycopg
import psycopg.errors as pge
from psycopg import pq

from wardian import errors
from wardian.store.cache import NoRosterCache
from wardian.store.engine import Engine
from wardian.store.postgres.schema import APPEND_LOCK
from wardian.store.url import redact_url

log = logging.getLogger("wardian.store.postgres")

IDLE_IN_TRANSACTION_MS = 10_000
LOCK_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0


class PgDb:
    """What the parts call `db`: `?` placeholders, and the append lock before a transaction's first write."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.wrote = False  # this transaction has taken the append lock (and written)
        self._sql: dict[str, str] = {}

    def _query(self, sql: str) -> LiteralString:
        query = self._sql.get(sql)
        if query is None:
            # Our statements hold no `?` or `%` inside string literals, so a plain replacement is exact.
            query = self._sql[sql] = sql.replace("%", "%%").replace("?", "%s")
        return q(query)

    def lock_appends(self) -> None:
        """Take the append lock, once per transaction (it is released at COMMIT or ROLLBACK)."""
        if not self.wrote:
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
            self.wrote = True

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        return self.conn.execute(self._query(sql), parameters)

    def write(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        self.lock_appends()
        return self.conn.execute(self._query(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> psycopg.Cursor[Any]:
        self.lock_appends()
        with self.conn.cursor() as cur:
            cur.executemany(self._query(sql), parameters)
            return cur


def q(text: str) -> LiteralString:
    """A statement this package builds from its own constants (savepoint names, the channel): never outside text."""
    return cast("LiteralString", text)


def storage_error(exc: psycopg.Error) -> errors.WardianError:
    """The storage error for a psycopg failure; its text carries no credential (libpq never prints passwords)."""
    if isinstance(exc, pge.DiskFull):
        return errors.StorageFull("the shared store's disk is full; nothing was admitted")
    if isinstance(exc, pge.DataCorrupted | pge.IndexCorrupted):
        return errors.StoreCorrupt(f"the shared store reports corruption: {exc}")
    return errors.StorageUnavailable(f"the shared store cannot be used: {str(exc).strip()[:300]}")


@contextmanager
def map_pg_errors() -> Generator[None]:
    try:
        yield
    except psycopg.Error as exc:
        raise storage_error(exc) from None


def commit_lost(exc: psycopg.Error) -> errors.DeliveryUncertain:
    return errors.DeliveryUncertain(
        "the shared store's answer to COMMIT was lost (the connection broke): this may or may not have been "
        f"stored; it is not retried ({type(exc).__name__})"
    )


def connect(url: str) -> psycopg.Connection[Any]:
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
        conn.execute(q(f"SET idle_in_transaction_session_timeout TO {IDLE_IN_TRANSACTION_MS}"))
        conn.execute(q(f"SET lock_timeout TO {LOCK_TIMEOUT_MS}"))
    except psycopg.Error as exc:
        conn.close()
        raise storage_error(exc) from None
    return conn


class PgEngine(Engine):
    """Transactions of one shared-store connection, replaced when it breaks; also the test backdoor of the shared
    store (`wardian.store.testing.Backdoor`). Nothing of the roster is cached: other apps change it."""

    driver_error = psycopg.Error

    def __init__(self, url: str, conn: psycopg.Connection[Any]) -> None:
        super().__init__(NoRosterCache())
        self.url = url
        self.conn = conn
        self._db = self.db = PgDb(conn)
        self._next_connect = 0.0
        self._backoff = BACKOFF_FIRST_S
        self.backend_pids: set[int] = {conn.info.backend_pid}  # every connection this store wrote through

    @property
    def broken(self) -> bool:
        return self.conn.closed or self.conn.pgconn.status != pq.ConnStatus.OK

    def _ensure_connected(self) -> None:
        """Replace a broken connection, at most once per backoff interval (0.1 s doubling to 5 s).

        Raises: StorageUnavailable (still no connection)."""
        if not self.broken:
            return
        now = time.monotonic()
        if now < self._next_connect:
            raise errors.StorageUnavailable("the shared store is unreachable; reconnecting (nothing was admitted)")
        try:
            conn = connect(self.url)
        except errors.StorageUnavailable:
            self._next_connect = now + self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
            raise
        with suppress(psycopg.Error):
            self.conn.close()
        self.conn = conn
        self._db = self.db = PgDb(conn)
        self._backoff = BACKOFF_FIRST_S
        self.backend_pids.add(conn.info.backend_pid)
        log.info("reconnected to the shared store %s", redact_url(self.url))

    def errors(self) -> AbstractContextManager[None]:
        return map_pg_errors()

    def operation_errors(self) -> AbstractContextManager[None]:
        # An operation's own psycopg error passes as it is: a batch then tells a broken connection or an aborted
        # transaction (`batch_aborted`) from one operation's failure by the connection's state.
        return nullcontext()

    def begin(self) -> None:
        self._ensure_connected()
        self.conn.execute("BEGIN")
        self._db.wrote = False

    def control(self, sql: str) -> None:
        self.conn.execute(q(sql))

    def can_roll_back(self) -> bool:
        return not self.broken

    def wrote(self) -> bool:
        return self._db.wrote

    def batch_aborted(self) -> bool:
        return self.broken or self.conn.info.transaction_status == pq.TransactionStatus.INERROR

    def abort_error(self, exc: Exception) -> BaseException:
        return exc if isinstance(exc, errors.WardianError) else errors.StorageUnavailable(str(exc))

    def commit_failed(self, exc: Exception, wrote: bool) -> None:
        """A COMMIT that wrote and whose connection broke may or may not have committed: its outcome is unknown."""
        if wrote and self.broken and isinstance(exc, psycopg.Error):
            raise commit_lost(exc) from None

    def clock_ms(self) -> int:
        with map_pg_errors():
            row = self.conn.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint").fetchone()
        assert row is not None
        return int(row[0])

    # --- the test backdoor ----------------------------------------------------------------------------

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Inside a transaction a test's statement may write anything: it takes the append lock first, as every
        writing operation does."""
        with map_pg_errors():
            cur = self._db.write(sql, parameters) if self.depth else self._db.execute(sql, parameters)
            return [tuple(row) for row in cur.fetchall()] if cur.description is not None else []

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self.atomic(), map_pg_errors():
            self._db.executemany(sql, rows)
