"""The shared backend: PostgreSQL (psycopg 3), for agents on several machines.

The parts are the same modules as the embedded store's; this package provides the engine's hooks (`engine`), the
connection they run on and its replacement when it breaks (`connection`), its pipelined batches (`pipeline`), the
roster cache (`roster_cache`), the schema and its migrations (`schema`), the announcements of other apps' commits
(`announcements`), the read-only first look of waits (`wait_reader`) and how long each connection waits for a silent
server (`liveness`).

Invariants:
- Every change runs inside `atomic()` (BEGIN, SAVEPOINT when nested) or a batch (one BEGIN, one COMMIT: group
  commit, as on SQLite). A batch's statements go out in one psycopg pipeline (`pipeline`); if any of them fails, the
  batch is rolled back and run again with a SAVEPOINT per operation, so the failing operation fails alone.
  `synchronous_commit` is `on` for this session, so a COMMIT returns once the WAL is flushed on the primary (and on
  synchronous standbys, when the operator configured them).
- A caller learns an outcome only after COMMIT returned. A COMMIT whose answer is lost (the connection broke) has an
  unknown outcome: every write of that batch is reported `uncertain`, never admitted and never refused.
- Mailbox order is commit order: every transaction takes the append lock before its first write (see `engine`).
- The roster is cached only as far as the roster's version, read by every batch, vouches for it (`roster_cache`):
  other apps change it (a session revoked on another host must be refused here).
- A broken connection is replaced at the next operation, with a bounded backoff; a dead network, or a server that
  stopped answering, is noticed within a bound on every connection (`liveness`). psycopg errors become storage
  errors here; nothing psycopg-specific leaves the store. No credential is ever in an error or a log line: the
  URL's password is refused before connecting (`check_store_url`) and libpq reads it from PGPASSFILE/PGSERVICE.
"""

from __future__ import annotations

import psycopg

from wardian import errors
from wardian.store.base import SqlStore
from wardian.store.postgres import schema
from wardian.store.postgres.announcements import Announcements
from wardian.store.postgres.connection import connect, map_pg_errors, storage_error
from wardian.store.postgres.engine import PgEngine
from wardian.store.postgres.wait_reader import PgWaitReader
from wardian.store.url import check_store_url, redact_url

__all__ = ["Announcements", "PgWaitReader", "PostgresStore", "migrate_store"]


class PostgresStore(SqlStore):
    """Synchronous access to one shared store (implements `wardian.store.api.Store`). One caller at a time."""

    inline_statements = False  # every statement is a round trip: the app's writer runs batches on a worker thread

    def __init__(self, engine: PgEngine, epoch: bytes, cursor_key: bytes) -> None:
        super().__init__(engine, epoch, cursor_key)
        self._pg = engine
        self._url = engine.url
        self._wait_reader: PgWaitReader | None = None

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> PostgresStore:
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
        return cls(PgEngine(url, conn), bytes(meta["epoch"]), bytes(meta["cursor_key"]))

    def close(self) -> None:
        self._pg.close()

    @property
    def backend_pids(self) -> set[int]:
        """Every connection this store wrote through (their announcements are this app's own)."""
        return self._pg.backend_pids

    def announcements(self) -> Announcements:
        """The stream of what other apps commit (see `Announcements`)."""
        return Announcements(self._url, lambda: self.backend_pids)

    def wait_reader(self) -> PgWaitReader:
        """The first look of waits, read on the app's event loop from a connection of its own (see `PgWaitReader`):
        one per store, opened by its `keep`."""
        if self._wait_reader is None:
            self._wait_reader = PgWaitReader(self._url, self.home_tag)
        return self._wait_reader

    def integrity_check(self) -> str:
        with map_pg_errors():
            self._pg.conn.execute("SELECT count(*) FROM interactions")
        return "ok"

    @property
    def schema_version(self) -> int:
        with map_pg_errors():
            return schema.schema_version(self._pg.conn)

    def test_backdoor(self) -> PgEngine:
        """What the tests and the bench reach beneath the operations (`wardian.store.testing`); never the app."""
        return self._pg


def migrate_store(url: str) -> tuple[int, int]:
    """`wardian store migrate`: bring the shared store at `url` to this wardian's schema; returns (before, after).

    Raises:
        InvalidArguments: the URL is refused (see `check_store_url`).
        StorageUnavailable: no connection, or the schema is newer than this wardian.
    """
    check_store_url(url)
    conn = connect(url)
    try:
        before = schema.schema_version(conn)
        return before, schema.migrate(conn)
    except psycopg.Error as exc:
        raise storage_error(exc) from None
    finally:
        conn.close()
