"""The shared store's connection of the moment: opening one (libpq's liveness settings, the session's settings),
noticing that it broke or stopped answering, replacing it after a bounded backoff, and what its errors mean.

The engine (`engine`) and the pipelined batch (`pipeline`) both hold the one `PgConnection` of a store: neither
imports the other. Its `db` (`PgDb`, what the parts run statements on) is the same object for the store's life; a
replacement only changes the connection under it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
import psycopg.errors as pge
from psycopg import pq

from wardian import errors
from wardian.store.postgres.db import PgDb, q
from wardian.store.postgres.liveness import Watchdog, with_liveness
from wardian.store.postgres.roster_cache import VersionedRosterCache
from wardian.store.url import redact_url

log = logging.getLogger("wardian.store.postgres")

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


class PgConnection:
    """One store's connection to the server, replaced when it breaks.

    A batch, its COMMIT or a transaction that waits for the server longer than `liveness.STALL_LIMIT_S` has its
    connection ended by the `watchdog` (a dead network is noticed sooner, by the connection's own settings: see
    `liveness`). A connection is replaced when it broke or was ended so, and only then: an error that leaves it usable
    (a statement refused, a lock waited for too long) is rolled back on it, and a connection is not recycled by age
    (its keepalives hold a firewall's or NAT's flow open, and a failover ends it anyway)."""

    def __init__(self, url: str, conn: psycopg.Connection[Any], cache: VersionedRosterCache) -> None:
        self.url = url
        self.conn = conn
        self.db = PgDb(conn, cache)
        self.backend_pids: set[int] = {conn.info.backend_pid}  # every connection this store wrote through
        self.watchdog = Watchdog()
        self.watchdog.follow(conn)
        self._next_connect = 0.0
        self._backoff = BACKOFF_FIRST_S

    @property
    def broken(self) -> bool:
        return self.conn.closed or self.conn.pgconn.status != pq.ConnStatus.OK or self.watchdog.tripped

    @property
    def in_error(self) -> bool:
        """The open transaction failed: the server refuses every statement of it until it is rolled back."""
        return self.conn.info.transaction_status == pq.TransactionStatus.INERROR

    def ensure_connected(self) -> None:
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
        self.db.replace(conn)
        self._backoff = BACKOFF_FIRST_S
        self.backend_pids.add(conn.info.backend_pid)
        log.info("reconnected to the shared store %s", redact_url(self.url))

    @contextmanager
    def errors(self) -> Generator[None]:
        """psycopg errors become storage errors (`failure`)."""
        try:
            yield
        except psycopg.Error as exc:
            # In a pipeline a statement's error may surface in a later one's call: the batch is then run again
            # op by op (`pipeline.run_pipelined`), whichever operation this error seemed to belong to.
            self.db.failed = self.db.pipe is not None
            raise self.failure(exc) from None

    def failure(self, exc: Exception) -> BaseException:
        """The storage error a failed statement of a transaction means (a domain error passes as it is)."""
        if isinstance(exc, errors.WardianError):
            return exc
        if self.watchdog.tripped:
            return errors.StorageUnavailable(
                f"the shared store did not answer for {self.watchdog.limit_s:g} s; its connection was dropped and is "
                "replaced (nothing was admitted)")
        return storage_error(exc) if isinstance(exc, psycopg.Error) else errors.StorageUnavailable(str(exc))

    def close(self) -> None:
        self.watchdog.close()
        with suppress(psycopg.Error):
            self.conn.close()
