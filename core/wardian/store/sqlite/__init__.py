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

from wardian.store.engine import Store
from wardian.store.sqlite.engine import SqliteBackend

__all__ = ["SqliteBackend", "open_sqlite"]


def open_sqlite(path: str | os.PathLike[str]) -> Store:
    """The store in the SQLite file at `path`, created and migrated when needed.

    Raises:
        StorageUnavailable, StorageFull, StoreCorrupt: the file cannot be opened or migrated.
    """
    return Store(SqliteBackend.open(path))
