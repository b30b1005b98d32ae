"""The shared engine's hooks: PostgreSQL's transactions through psycopg 3, the append lock, reconnection, and
what a COMMIT whose answer was lost means.

Mailbox order is commit order: before its first write, every transaction takes one transaction-scoped advisory
lock (`APPEND_LOCK`), so identity values are handed out and committed in the same order on every host and a receive
can never pass a record a slower transaction is still writing below it. The parts say which statements write
(`Db.write`); reads take no lock. With that lock first, before any row lock, writers cannot deadlock. In a pipelined
batch the sends' records are written last, as one statement with the lock just before it (`PgDb.flush`), so a batch of
sends holds the lock from that statement to its COMMIT only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any, TypeVar

import psycopg
import psycopg.errors as pge
from psycopg import pq

from wardian import errors
from wardian.store.api import BatchResult
from wardian.store.engine import Engine
from wardian.store.postgres.db import PgDb, q
from wardian.store.postgres.liveness import Watchdog, with_liveness
from wardian.store.postgres.pipeline import run_pipelined
from wardian.store.postgres.roster_cache import VersionedRosterCache
from wardian.store.url import redact_url

log = logging.getLogger("wardian.store.postgres")
S = TypeVar("S")

IDLE_IN_TRANSACTION_MS = 10_000
LOCK_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0


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
    """A connection in autocommit mode (transactions are explicit) with synchronous_commit on, which notices a dead
    network (`liveness`).

    Raises: StorageUnavailable (the message names the server, never a credential)."""
    try:
        conn = psycopg.connect(with_liveness(url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                               application_name="wardian app", prepare_threshold=5)
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
    store (`wardian.store.testing.Backdoor`). The roster is cached only under the version check of
    `roster_cache`, inside a pipelined batch (`pipeline.run_pipelined`).

    A batch, its COMMIT or a transaction that waits for the server longer than `liveness.STALL_LIMIT_S` has its
    connection ended by the `watchdog` (a dead network is noticed sooner, by the connection's own settings: see
    `liveness`). A connection is replaced when it broke or was ended so, and only then: an error that leaves it usable
    (a statement refused, a lock waited for too long) is rolled back on it, and a connection is not recycled by age
    (its keepalives hold a firewall's or NAT's flow open, and a failover ends it anyway)."""

    driver_error = psycopg.Error

    def __init__(self, url: str, conn: psycopg.Connection[Any]) -> None:
        self.roster_cache = VersionedRosterCache()
        super().__init__(self.roster_cache)
        self.url = url
        self.conn = conn
        self._db = self.db = PgDb(conn, self.roster_cache)
        self.pipeline_failed = False  # a statement of the open pipelined batch failed (it then runs op by op)
        self._next_connect = 0.0
        self._backoff = BACKOFF_FIRST_S
        self.backend_pids: set[int] = {conn.info.backend_pid}  # every connection this store wrote through
        self.watchdog = Watchdog()
        self.watchdog.follow(conn)

    @property
    def broken(self) -> bool:
        return self.conn.closed or self.conn.pgconn.status != pq.ConnStatus.OK or self.watchdog.tripped

    def close(self) -> None:
        self.watchdog.close()
        with suppress(psycopg.Error):
            self.conn.close()

    def _ensure_connected(self) -> None:
        """Replace a broken connection; after a failed attempt, refuse at once for a backoff interval (0.1 s doubling
        to 5 s) before the next.

        Raises: StorageUnavailable (still no connection)."""
        if not self.broken:
            return
        if time.monotonic() < self._next_connect:
            raise errors.StorageUnavailable("the shared store is unreachable; reconnecting (nothing was admitted)")
        try:
            conn = connect(self.url)
        except errors.StorageUnavailable:
            # From the failure, not the attempt: on a dead network an attempt lasts CONNECT_TIMEOUT_S, and the next
            # batch would otherwise hold the writer for another one at once.
            self._next_connect = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
            raise
        with suppress(psycopg.Error):
            self.conn.close()
        self.conn = conn
        self.watchdog.follow(conn)
        self._db = self.db = PgDb(conn, self.roster_cache)
        self._backoff = BACKOFF_FIRST_S
        self.backend_pids.add(conn.info.backend_pid)
        log.info("reconnected to the shared store %s", redact_url(self.url))

    @contextmanager
    def errors(self) -> Generator[None]:
        try:
            yield
        except psycopg.Error as exc:
            # In a pipeline a statement's error may surface in a later one's call: the batch is then run again
            # op by op (`pipeline.run_pipelined`), whichever operation this error seemed to belong to.
            self.pipeline_failed = self._db.pipe is not None
            raise self.abort_error(exc) from None

    @property
    def pg_db(self) -> PgDb:
        return self._db

    def ensure_connected(self) -> None:
        self._ensure_connected()

    def run_op(self, op: Callable[[S], Any], store: S, bare: bool) -> Any:
        return self._run_op(op, store, bare)

    def begin_batch(
        self, ops: Sequence[Callable[[S], Any]], bare: Sequence[bool] | None, store: S
    ) -> list[BatchResult]:
        """One pipelined transaction for the whole batch (see `pipeline.run_pipelined`); when a statement failed or a
        cached roster entry it used went stale, the batch runs again with a savepoint per operation, so the failing
        operation fails alone."""
        with self.watchdog.watch():
            results = run_pipelined(self, ops, bare, store)
            return results if results is not None else super().begin_batch(ops, bare, store)

    def commit_batch(self, results: list[BatchResult]) -> list[BatchResult]:
        with self.watchdog.watch():
            return super().commit_batch(results)

    @contextmanager
    def atomic(self) -> Generator[None]:
        with self.watchdog.watch(), super().atomic():
            yield

    def operation_errors(self) -> AbstractContextManager[None]:
        # An operation's own psycopg error passes as it is: a batch then tells a broken connection or an aborted
        # transaction (`batch_aborted`) from one operation's failure by the connection's state.
        return nullcontext()

    def begin(self) -> None:
        self._ensure_connected()
        self.conn.execute("BEGIN")
        self._db.wrote = False
        self._db.appends.clear()

    def control(self, sql: str) -> None:
        if sql == "ROLLBACK":
            self._db.appends.clear()  # nothing of the transaction stands: the rows held back neither
        elif self._db.appends:
            self._db.flush()
        self.conn.execute(q(sql))

    def can_roll_back(self) -> bool:
        return not self.broken

    def wrote(self) -> bool:
        return self._db.wrote

    def batch_aborted(self) -> bool:
        return self.broken or self.conn.info.transaction_status == pq.TransactionStatus.INERROR

    def abort_error(self, exc: Exception) -> BaseException:
        if isinstance(exc, errors.WardianError):
            return exc
        if self.watchdog.tripped:
            return errors.StorageUnavailable(
                f"the shared store did not answer for {self.watchdog.limit_s:g} s; its connection was dropped and is "
                "replaced (nothing was admitted)")
        return storage_error(exc) if isinstance(exc, psycopg.Error) else errors.StorageUnavailable(str(exc))

    def commit_failed(self, exc: Exception, wrote: bool) -> None:
        """A COMMIT that wrote and whose connection broke may or may not have committed: its outcome is unknown."""
        if wrote and self.broken and isinstance(exc, psycopg.Error):
            raise commit_lost(exc) from None

    def clock_ms(self) -> int:
        with map_pg_errors():
            self._db.flush()
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
