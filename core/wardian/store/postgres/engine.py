"""The shared backend (implements `wardian.store.api.Backend`): opening a shared store, PostgreSQL's transactions
through psycopg 3 on the store's connection of the moment (`connection`), its pipelined batches (`pipeline`), the
append lock, and what a COMMIT whose answer was lost means.

Mailbox order is commit order: before its first write, every transaction takes one transaction-scoped advisory
lock (`APPEND_LOCK`), so identity values are handed out and committed in the same order on every host and a receive
can never pass a record a slower transaction is still writing below it. The parts say which statements write
(`Db.write`); reads take no lock. With that lock first, before any row lock, writers cannot deadlock. In a pipelined
batch the sends' records are written last, as one statement with the lock just before it (`PgDb.flush`), so a batch of
sends holds the lock from that statement to its COMMIT only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import psycopg
from psycopg import pq

from wardian import errors
from wardian.store.api import Backend, BatchResult, Call, Transaction
from wardian.store.postgres import schema
from wardian.store.postgres.announcements import Announcements
from wardian.store.postgres.connection import PgConnection, commit_lost, connect, map_pg_errors, storage_error
from wardian.store.postgres.db import q
from wardian.store.postgres.pipeline import run_pipelined
from wardian.store.postgres.roster_cache import VersionedRosterCache
from wardian.store.postgres.wait_reader import PgWaitReader
from wardian.store.url import check_store_url, redact_url


class PostgresBackend(Backend):
    """One shared store, on its connection of the moment (`connection.PgConnection`, replaced when it breaks); also
    the test backdoor of the shared store (`wardian.store.testing.Backdoor`). The roster is cached only under the
    version check of `roster_cache`, inside a pipelined batch (`pipeline.run_pipelined`)."""

    driver_error = psycopg.Error
    inline_statements = False  # every statement is a round trip: the app's writer runs batches on a worker thread

    def __init__(self, url: str, conn: psycopg.Connection[Any], epoch: bytes, cursor_key: bytes) -> None:
        self.url = url
        self.roster_cache = VersionedRosterCache()
        self.cache = self.roster_cache
        self.link = PgConnection(url, conn, self.roster_cache)
        self.db = self.link.db  # the parts' `Db`; this backend's own uses reach it as `link.db` (a `PgDb`)
        self.epoch = epoch
        self.cursor_key = cursor_key
        self._wait_reader: PgWaitReader | None = None

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> PostgresBackend:
        """Connect, migrate (under the migration lock) when `migrate`, and load the store's keys.

        Raises:
            InvalidArguments: the URL is not a PostgreSQL URL, or holds a password.
            StorageUnavailable: no connection, or the schema is newer than this wardian (or missing, without
                `migrate`).
        """
        check_store_url(url)
        conn = connect(url)
        try:
            version = schema.migrate(conn) if migrate else schema.schema_version(conn)
            if version != len(schema.PG_MIGRATIONS):
                raise errors.StorageUnavailable(
                    f"the shared store {redact_url(url)} has schema version {version}, this wardian needs "
                    f"{len(schema.PG_MIGRATIONS)}; run `wardian store migrate --store URL`",
                    field="store",
                )
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except psycopg.Error as exc:
            conn.close()
            raise storage_error(exc) from None
        except BaseException:
            conn.close()
            raise
        return cls(url, conn, bytes(meta["epoch"]), bytes(meta["cursor_key"]))

    def close(self) -> None:
        self.link.close()

    def announcements(self) -> Announcements:
        """The stream of what other apps commit (see `Announcements`), without this app's own."""
        return Announcements(self.url, lambda: self.link.backend_pids)

    def wait_reader(self) -> PgWaitReader:
        """The first look of waits, read on the app's event loop from a connection of its own (see `PgWaitReader`):
        one per store, opened by its `keep`."""
        if self._wait_reader is None:
            self._wait_reader = PgWaitReader(self.url, self.epoch.hex()[:8])
        return self._wait_reader

    def integrity_check(self) -> str:
        with map_pg_errors():
            self.link.conn.execute("SELECT count(*) FROM interactions")
        return "ok"

    @property
    def schema_version(self) -> int:
        with map_pg_errors():
            return schema.schema_version(self.link.conn)

    # --- the transaction primitives -------------------------------------------------------------------

    def errors(self) -> AbstractContextManager[None]:
        return self.link.errors()

    def operation_errors(self) -> AbstractContextManager[None]:
        # An operation's own psycopg error passes as it is: a batch then tells a broken connection or an aborted
        # transaction (`batch_aborted`) from one operation's failure by the connection's state.
        return nullcontext()

    def watch(self) -> AbstractContextManager[None]:
        return self.link.watchdog.watch()

    def pipelined_batch(self, tx: Transaction, calls: Sequence[Call],
                        bare: Sequence[bool] | None) -> list[BatchResult] | None:
        """One pipelined transaction for the whole batch (see `pipeline.run_pipelined`); None when a statement failed
        or a cached roster entry it used went stale: the store then runs it again with a savepoint per operation, so
        the failing operation fails alone."""
        return run_pipelined(self.link, self.roster_cache, tx, calls, bare)

    def begin(self) -> None:
        self.link.ensure_connected()
        self.link.conn.execute("BEGIN")
        self.link.db.wrote = False
        self.link.db.appends.clear()

    def control(self, sql: str) -> None:
        if sql == "ROLLBACK":
            self.link.db.appends.clear()  # nothing of the transaction stands: the rows held back neither
        elif self.link.db.appends:
            self.link.db.flush()
        self.link.conn.execute(q(sql))

    def can_roll_back(self) -> bool:
        return not self.link.broken

    def wrote(self) -> bool:
        return self.link.db.wrote

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
            self.link.db.flush()
            row = self.link.conn.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint").fetchone()
        assert row is not None
        return int(row[0])

    # --- the test backdoor ----------------------------------------------------------------------------

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Inside a transaction a test's statement may write anything: it takes the append lock first, as every
        writing operation does."""
        in_transaction = self.link.conn.info.transaction_status != pq.TransactionStatus.IDLE
        with map_pg_errors():
            cur = self.db.write(sql, parameters) if in_transaction else self.db.execute(sql, parameters)
            return [tuple(row) for row in cur.fetchall()] if cur.description is not None else []

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with map_pg_errors():
            self.db.executemany(sql, rows)
