"""The embedded backend (implements `wardian.store.api.Backend`): opening `wardian.db`, SQLite's transactions (`BEGIN
IMMEDIATE`, so a read-then-write never meets SQLITE_BUSY half-way), its error mapping, the check that the file is still
the one opened, and the roster cache's invalidation by TEMP triggers.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from wardian import errors
from wardian.model import now_ms
from wardian.store.api import Backend, StoreBusy
from wardian.store.cache import MemoryRosterCache
from wardian.store.sqlite import migrations

# Opening and migrating: nothing else is served yet, so SQLite's own wait is fine (as long as the writer's bound).
OPEN_BUSY_TIMEOUT_MS = 20_000
# Afterwards: a few ms, so no statement holds the event loop for long in the busy handler.
BUSY_TIMEOUT_MS = 5


@contextmanager
def map_sqlite_errors() -> Generator[None]:
    """Translate sqlite3 failures into storage errors; nothing sqlite-specific leaves the store."""
    try:
        yield
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary == sqlite3.SQLITE_FULL:
            raise errors.StorageFull("the store's disk or page limit is full; nothing was admitted") from exc
        if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise StoreBusy(f"another process holds the store's write lock: {exc}") from exc
        if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            raise errors.StoreCorrupt(f"the store is corrupt: {exc}") from exc
        raise errors.StorageUnavailable(f"the store cannot be written: {exc}") from exc


class Connection(sqlite3.Connection):
    """A connection that speaks the parts' `Db`: one process writes, so a write needs no lock beyond SQLite's own."""

    write = sqlite3.Connection.execute


def connect(path: str) -> Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, cached_statements=256,
                           factory=Connection)
    assert isinstance(conn, Connection)
    return conn


class SqliteBackend(Backend):
    """One SQLite connection to a home's `wardian.db`; also the test backdoor of the embedded store
    (`wardian.store.testing.SqliteBackdoor`)."""

    driver_error = sqlite3.Error
    inline_statements = True  # statements take microseconds: the app's writer runs them on its event loop

    def __init__(self, conn: Connection, path: str | None, epoch: bytes, cursor_key: bytes) -> None:
        # The roster caches are valid for what this connection sees: a TEMP trigger on every write to agents or
        # sessions clears them, and so does every rollback (the store's `undo`).
        self.cache = MemoryRosterCache()
        self.conn = conn
        self.db = conn
        self.epoch = epoch
        self.cursor_key = cursor_key
        self._batch_changes = 0
        self._path = path
        self._identity: tuple[int, int] = (0, 0)
        if path is not None:
            st = os.stat(path)
            self._identity = (st.st_dev, st.st_ino)
        conn.create_function("wardian_roster_changed", 0, self.cache.clear)
        for table in ("agents", "sessions"):
            for event in ("INSERT", "UPDATE", "DELETE"):
                conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS roster_{table}_{event.lower()} AFTER {event} "
                             f"ON main.{table} BEGIN SELECT wardian_roster_changed(); END")

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SqliteBackend:
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
                backend = cls(conn, os.fspath(path), epoch, key)
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            except BaseException:
                conn.close()
                raise
        return backend

    def close(self) -> None:
        self.conn.close()

    def integrity_check(self) -> str:
        with map_sqlite_errors():
            return str(self.conn.execute("PRAGMA integrity_check").fetchone()[0])

    def errors(self) -> AbstractContextManager[None]:
        return map_sqlite_errors()

    def operation_errors(self) -> AbstractContextManager[None]:
        return map_sqlite_errors()

    def begin(self) -> None:
        self._batch_changes = self.conn.total_changes
        self.conn.execute("BEGIN IMMEDIATE")

    def control(self, sql: str) -> None:
        self.conn.execute(sql)

    def can_roll_back(self) -> bool:
        return self.conn.in_transaction

    def wrote(self) -> bool:
        """Whether the open transaction changed any row (its COMMIT then appends to the WAL and fsyncs it)."""
        return self.conn.in_transaction and self.conn.total_changes != self._batch_changes

    def batch_aborted(self) -> bool:
        # SQLite rolls the whole transaction back by itself on some errors (SQLITE_FULL, IOERR).
        return not self.conn.in_transaction

    def before_commit(self) -> None:
        """Refuse to COMMIT when wardian.db was removed or replaced under the open connection: SQLite would
        go on committing to the unlinked inode, and a receipt would be a lie the next start cannot see."""
        if self._path is None:
            return
        try:
            st = os.stat(self._path)
            wal_present = os.path.exists(self._path + "-wal")
        except OSError:
            st, wal_present = None, False
        if st is None or (st.st_dev, st.st_ino) != self._identity or not wal_present:
            raise errors.StorageUnavailable(
                f"the store file {self._path} was removed or replaced while the app ran; nothing was admitted. "
                "Stop the app, restore the home, and start it again")

    def clock_ms(self) -> int:
        return now_ms()  # one machine: its clock

    def index_hint(self, index: str) -> str:
        return f"INDEXED BY {index}"

    # --- the test backdoor ----------------------------------------------------------------------------

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with map_sqlite_errors():
            return [tuple(row) for row in self.conn.execute(sql, parameters).fetchall()]

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with map_sqlite_errors():
            self.conn.executemany(sql, rows)

    def set_progress_handler(self, handler: Callable[[], int] | None, every: int) -> None:
        self.conn.set_progress_handler(handler, every)
