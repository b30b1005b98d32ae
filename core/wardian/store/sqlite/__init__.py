"""The embedded backend: SQLite in WAL mode with synchronous=FULL, in the home's `wardian.db`, opened by the app alone.

Invariants:
- Every change runs inside `atomic()`: `BEGIN IMMEDIATE` at the outside, a SAVEPOINT when nested; batches are one
  transaction with a savepoint per operation (`wardian.store.engine`).
- A caller learns an outcome only after COMMIT returned: an acknowledged record survives `kill -9`, and with
  `synchronous=FULL` an OS crash or power loss as far as the disk honours fsync.
- A COMMIT is refused when `wardian.db` was removed or replaced under the open connection.
- sqlite3 errors become storage errors (`engine.map_sqlite_errors`); nothing sqlite-specific leaves the store.
- Opened, the connection waits at most `BUSY_TIMEOUT_MS` in SQLite's busy handler, which sleeps in C on the caller's
  thread (the app's event loop): a write lock held by another process is `StoreBusy` at once, and the app's writer
  waits for it off the loop and runs the batch again (docs/design/architecture.md, "The store").
"""

from __future__ import annotations

import os

from wardian import errors
from wardian.store.base import SqlStore
from wardian.store.sqlite import migrations
from wardian.store.sqlite.engine import SqliteEngine, connect, map_sqlite_errors

__all__ = ["SqliteStore"]

# Opening and migrating: nothing else is served yet, so SQLite's own wait is fine (as long as the writer's bound).
OPEN_BUSY_TIMEOUT_MS = 20_000
# Afterwards: a few ms, so no statement holds the event loop for long in the busy handler.
BUSY_TIMEOUT_MS = 5


class SqliteStore(SqlStore):
    """Synchronous access to one home's `wardian.db` (implements `wardian.store.api.Store`).

    Not thread-safe: one caller at a time (the app's writer, which may run a batch's COMMIT on a worker thread).
    """

    inline_statements = True  # statements take microseconds: the app's writer runs them on its event loop

    def __init__(self, engine: SqliteEngine, epoch: bytes, cursor_key: bytes) -> None:
        super().__init__(engine, epoch, cursor_key)
        self._sqlite = engine

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SqliteStore:
        """Open (creating and migrating when needed) the store at `path`.

        Raises:
            StorageUnavailable, StorageFull, StoreCorrupt: the file cannot be opened or migrated.
        """
        with map_sqlite_errors():
            conn = connect(os.fspath(path))
            try:
                conn.execute(f"PRAGMA busy_timeout = {OPEN_BUSY_TIMEOUT_MS}")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise errors.StorageUnavailable(f"the store could not enter WAL mode (got {mode!r})")
                # FULL: a receipt is a durability promise across OS crash and power loss, not only across an app
                # crash.
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
                migrations.migrate(conn)
                epoch, key = migrations.load_meta(conn)
                engine = SqliteEngine(conn, os.fspath(path))
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            except BaseException:
                conn.close()
                raise
        return cls(engine, epoch, key)

    def close(self) -> None:
        self._sqlite.conn.close()

    def integrity_check(self) -> str:
        with map_sqlite_errors():
            return str(self._sqlite.conn.execute("PRAGMA integrity_check").fetchone()[0])

    def test_backdoor(self) -> SqliteEngine:
        """What the tests and the bench reach beneath the operations (`wardian.store.testing`); never the app."""
        return self._sqlite
