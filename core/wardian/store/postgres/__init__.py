"""The shared backend: PostgreSQL (psycopg 3), for agents on several machines.

The store over it and its parts are the same as the embedded store's (`wardian.store.engine.Store`); this package is
the backend (`engine.PostgresBackend`): the connection it runs on and its replacement when it breaks (`connection`),
its pipelined batches (`pipeline`), the roster cache (`roster_cache`), the schema and its migrations (`schema`), the
announcements of other apps' commits (`announcements`), the read-only first look of waits (`wait_reader`) and how long
each connection waits for a silent server (`liveness`).

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

from wardian.store.engine import Store
from wardian.store.postgres import schema
from wardian.store.postgres.announcements import Announcements
from wardian.store.postgres.connection import connect, storage_error
from wardian.store.postgres.engine import PostgresBackend
from wardian.store.postgres.wait_reader import PgWaitReader
from wardian.store.url import check_store_url

__all__ = ["Announcements", "PgWaitReader", "PostgresBackend", "migrate_store", "open_postgres"]


def open_postgres(url: str, *, migrate: bool = True) -> Store:
    """The shared store at `url` (see `PostgresBackend.open`).

    Raises:
        InvalidArguments: the URL is not a PostgreSQL URL, or holds a password.
        StorageUnavailable: no connection, or the schema is newer than this wardian (or missing, without `migrate`).
    """
    return Store(PostgresBackend.open(url, migrate=migrate))


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
