"""The shared engine's hooks: PostgreSQL's transactions through psycopg 3 on the store's connection of the moment
(`connection`), the append lock, and what a COMMIT whose answer was lost means.

Mailbox order is commit order: before its first write, every transaction takes one transaction-scoped advisory
lock (`APPEND_LOCK`), so identity values are handed out and committed in the same order on every host and a receive
can never pass a record a slower transaction is still writing below it. The parts say which statements write
(`Db.write`); reads take no lock. With that lock first, before any row lock, writers cannot deadlock. In a pipelined
batch the sends' records are written last, as one statement with the lock just before it (`PgDb.flush`), so a batch of
sends holds the lock from that statement to its COMMIT only.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import psycopg

from wardian.store.api import BatchResult, Call
from wardian.store.engine import Engine
from wardian.store.postgres.connection import PgConnection, commit_lost, map_pg_errors
from wardian.store.postgres.db import q
from wardian.store.postgres.pipeline import run_pipelined
from wardian.store.postgres.roster_cache import VersionedRosterCache


class PgEngine(Engine):
    """Transactions of one shared store, on its connection of the moment (`connection.PgConnection`, replaced when it
    breaks); also the test backdoor of the shared store (`wardian.store.testing.Backdoor`). The roster is cached only
    under the version check of `roster_cache`, inside a pipelined batch (`pipeline.run_pipelined`)."""

    driver_error = psycopg.Error

    def __init__(self, url: str, conn: psycopg.Connection[Any]) -> None:
        self.roster_cache = VersionedRosterCache()
        super().__init__(self.roster_cache)
        self.link = PgConnection(url, conn, self.roster_cache)
        self.url = url
        self._db = self.db = self.link.db

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The connection of the moment (the test backdoor's, and the store's own checks)."""
        return self.link.conn

    @property
    def backend_pids(self) -> set[int]:
        return self.link.backend_pids

    def close(self) -> None:
        self.link.close()

    def errors(self) -> AbstractContextManager[None]:
        return self.link.errors()

    def run_op(self, call: Call, store: object, bare: bool) -> Any:
        return self._run_op(call, store, bare)

    def begin_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None, store: object) -> list[BatchResult]:
        """One pipelined transaction for the whole batch (see `pipeline.run_pipelined`); when a statement failed or a
        cached roster entry it used went stale, the batch runs again with a savepoint per operation, so the failing
        operation fails alone."""
        with self.link.watchdog.watch():
            results = run_pipelined(self.link, self.roster_cache, self, calls, bare, store)
            return results if results is not None else super().begin_batch(calls, bare, store)

    def commit_batch(self, results: list[BatchResult]) -> list[BatchResult]:
        with self.link.watchdog.watch():
            return super().commit_batch(results)

    @contextmanager
    def atomic(self) -> Generator[None]:
        with self.link.watchdog.watch(), super().atomic():
            yield

    def operation_errors(self) -> AbstractContextManager[None]:
        # An operation's own psycopg error passes as it is: a batch then tells a broken connection or an aborted
        # transaction (`batch_aborted`) from one operation's failure by the connection's state.
        return nullcontext()

    def begin(self) -> None:
        self.link.ensure_connected()
        self.link.conn.execute("BEGIN")
        self._db.wrote = False
        self._db.appends.clear()

    def control(self, sql: str) -> None:
        if sql == "ROLLBACK":
            self._db.appends.clear()  # nothing of the transaction stands: the rows held back neither
        elif self._db.appends:
            self._db.flush()
        self.link.conn.execute(q(sql))

    def can_roll_back(self) -> bool:
        return not self.link.broken

    def wrote(self) -> bool:
        return self._db.wrote

    def batch_aborted(self) -> bool:
        return self.link.broken or self.link.in_error

    def abort_error(self, exc: Exception) -> BaseException:
        return self.link.failure(exc)

    def commit_failed(self, exc: Exception, wrote: bool) -> None:
        """A COMMIT that wrote and whose connection broke may or may not have committed: its outcome is unknown."""
        if wrote and self.link.broken and isinstance(exc, psycopg.Error):
            raise commit_lost(exc) from None

    def clock_ms(self) -> int:
        with map_pg_errors():
            self._db.flush()
            row = self.link.conn.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint").fetchone()
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
