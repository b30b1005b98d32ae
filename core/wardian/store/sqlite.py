"""The embedded backend: SQLite in WAL mode with synchronous=FULL, in the home's `wardian.db`, opened by the app alone.

Invariants:
- Every change runs inside `atomic()`: `BEGIN IMMEDIATE` at the outside (so a read-then-write never meets
  SQLITE_BUSY half-way), a SAVEPOINT when nested. `begin_batch` wraps many operations in one transaction, each
  in its own savepoint, so one failing operation never takes its neighbours down (group commit).
- A caller learns an outcome only after COMMIT returned: an acknowledged record survives `kill -9`, and with
  `synchronous=FULL` an OS crash or power loss as far as the disk honours fsync.
- A COMMIT is refused when `wardian.db` was removed or replaced under the open connection.
- sqlite3 errors become storage errors here (`_map_sqlite_errors`); nothing sqlite-specific leaves the store.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from wardian import errors
from wardian.model import Agent, Caller, now_ms
from wardian.store.api import BatchResult, Store
from wardian.store.hosts import HostOps
from wardian.store.ledger import TaskLedgerOps
from wardian.store.mailbox import MailboxOps
from wardian.store.migrations import MIGRATIONS
from wardian.store.roster import RosterOps


@contextmanager
def _map_sqlite_errors() -> Iterator[None]:
    """Translate sqlite3 failures into storage errors; nothing sqlite-specific leaves the store."""
    try:
        yield
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary == sqlite3.SQLITE_FULL:
            raise errors.StorageFull("the store's disk or page limit is full; nothing was admitted") from exc
        if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            raise errors.StoreCorrupt(f"the store is corrupt: {exc}") from exc
        raise errors.StorageUnavailable(f"the store cannot be written: {exc}") from exc


class SqliteStore(HostOps, RosterOps, MailboxOps, TaskLedgerOps):
    """Synchronous access to one home's `wardian.db` (implements `wardian.store.api.Store`).

    Not thread-safe: one caller at a time (the app's writer, which may run a batch's COMMIT on a worker thread).
    """

    inline_statements = True  # statements take microseconds: the app's writer runs them on its event loop

    def __init__(self, conn: sqlite3.Connection, epoch: bytes, cursor_key: bytes) -> None:
        self._conn = conn
        self._db = conn
        self.epoch = epoch
        self._cursor_key = cursor_key
        self._depth = 0
        self._batch_changes = 0
        self._path: str | None = None
        self._identity: tuple[int, int] = (0, 0)
        # The roster caches are valid for what this connection sees: a TEMP trigger on every write to agents or
        # sessions clears them, and so does every rollback (a cache filled inside a transaction that did not
        # commit must not outlive it).
        self._sessions: dict[int, tuple[bytes, Caller, str]] = {}
        self._targets: dict[str, tuple[Agent, ...]] = {}
        conn.create_function("wardian_roster_changed", 0, self._roster_changed)
        for table in ("agents", "sessions"):
            for event in ("INSERT", "UPDATE", "DELETE"):
                conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS roster_{table}_{event.lower()} AFTER {event} "
                             f"ON main.{table} BEGIN SELECT wardian_roster_changed(); END")

    # --- lifecycle ------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SqliteStore:
        """Open (creating and migrating when needed) the store at `path`.

        Raises:
            StorageUnavailable, StorageFull, StoreCorrupt: the file cannot be opened or migrated.
        """
        with _map_sqlite_errors():
            conn = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False,
                                   cached_statements=256)
            try:
                conn.execute("PRAGMA busy_timeout = 5000")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise errors.StorageUnavailable(f"the store could not enter WAL mode (got {mode!r})")
                # FULL: a receipt is a durability promise across OS crash and power loss, not only
                # across an app crash (reliability-matrix Part 4, decision 1).
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
                _migrate(conn)
                epoch, key = _load_meta(conn)
            except BaseException:
                conn.close()
                raise
        store = cls(conn, epoch, key)
        store._path = os.fspath(path)
        st = os.stat(store._path)
        store._identity = (st.st_dev, st.st_ino)
        return store

    def _check_file_identity(self) -> None:
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

    def close(self) -> None:
        self._conn.close()

    def _index_hint(self, index: str) -> str:
        return f"INDEXED BY {index}"

    def _clock_ms(self) -> int:
        return now_ms()  # one machine: its clock

    def integrity_check(self) -> str:
        with _map_sqlite_errors():
            return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    # --- roster caches --------------------------------------------------------------------------------

    def _roster_changed(self) -> None:
        self._sessions.clear()
        self._targets.clear()

    def _rolled_back(self) -> None:
        """Called on every path that ends a transaction or savepoint without COMMIT/RELEASE."""
        self._roster_changed()

    # --- transactions ---------------------------------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction (BEGIN IMMEDIATE) or, nested, one savepoint."""
        conn = self._conn
        with _map_sqlite_errors():
            if self._depth == 0:
                conn.execute("BEGIN IMMEDIATE")
            else:
                conn.execute(f"SAVEPOINT sp{self._depth}")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                self._rolled_back()
                # SQLite may already have rolled the whole transaction back (SQLITE_FULL, IOERR): then
                # there is nothing left to undo, and the original error is the one that matters.
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        if self._depth == 0:
                            conn.execute("ROLLBACK")
                        else:
                            conn.execute(f"ROLLBACK TO sp{self._depth}")
                            conn.execute(f"RELEASE sp{self._depth}")
                raise
            self._depth -= 1
            if self._depth == 0:
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error:
                    self._rolled_back()
                    if conn.in_transaction:
                        with suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            else:
                conn.execute(f"RELEASE sp{self._depth}")

    def run_batch(self, ops: Sequence[Callable[[Store], Any]],
                  bare: Sequence[bool] | None = None) -> list[BatchResult]:
        """Run `ops` in one transaction (group commit): each in its own savepoint, one COMMIT for all.

        If the COMMIT itself fails, every operation of the batch fails with that storage error: nothing of
        the batch was committed, so nothing is reported as admitted.
        """
        return self.commit_batch(self.begin_batch(ops, bare))

    def begin_batch(self, ops: Sequence[Callable[[Store], Any]],
                    bare: Sequence[bool] | None = None) -> list[BatchResult]:
        """`run_batch` up to its COMMIT: BEGIN IMMEDIATE, then each op in its own savepoint.

        `bare[i]` runs op i without a savepoint of its own: only for an op whose writes all happen in one
        store method (which is atomic by itself) after its reads, so a failure leaves nothing behind
        (saves two statements per op on the send path, #2).

        The transaction stays open for `commit_batch`, which the app runs on another thread when the batch
        wrote something (`batch_wrote`), so the fsync does not hold its event loop. The results are final
        only once `commit_batch` returned them. If SQLite aborted the whole transaction (SQLITE_FULL, IOERR),
        every result already carries that error and no transaction is left open.
        """
        conn = self._conn
        self._batch_changes = conn.total_changes
        try:
            with _map_sqlite_errors():
                conn.execute("BEGIN IMMEDIATE")
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in ops]
        self._depth = 1
        results: list[BatchResult] = []
        try:
            for i, op in enumerate(ops):
                try:
                    if bare is not None and bare[i]:
                        with _map_sqlite_errors():
                            value = op(self)
                    else:
                        with self.atomic():
                            value = op(self)
                except Exception as exc:
                    if not conn.in_transaction:
                        # SQLite rolled the whole batch back (e.g. SQLITE_FULL): nothing of it stands.
                        self._depth = 0
                        self._rolled_back()
                        return [BatchResult(None, exc) for _ in ops]
                    results.append(BatchResult(None, exc))
                else:
                    results.append(BatchResult(value, None))
        except BaseException:
            self._depth = 0
            self._rolled_back()
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        return results

    @property
    def batch_wrote(self) -> bool:
        """Whether the open batch changed any row (its COMMIT then appends to the WAL and fsyncs it)."""
        return self._conn.in_transaction and self._conn.total_changes != self._batch_changes

    def commit_batch(self, results: list[BatchResult]) -> list[BatchResult]:
        """COMMIT the batch `begin_batch` left open and return its final results.

        If the COMMIT fails, every operation fails with that storage error (nothing of the batch stands).
        """
        if self._depth == 0:
            return results  # begin_batch failed or SQLite aborted the batch: the errors are in `results`
        self._depth = 0
        try:
            with _map_sqlite_errors():
                try:
                    if self.batch_wrote:
                        self._check_file_identity()  # a read-only batch promises nothing
                    self._conn.execute("COMMIT")
                except (sqlite3.Error, errors.WardianError):
                    self._rolled_back()
                    if self._conn.in_transaction:
                        with suppress(sqlite3.Error):
                            self._conn.execute("ROLLBACK")
                    raise
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in results]
        return results


def _migrate(conn: sqlite3.Connection) -> None:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > len(MIGRATIONS):
        raise errors.StorageUnavailable(
            f"the store has schema version {version}, newer than this wardian understands "
            f"({len(MIGRATIONS)}); upgrade wardian")
    for number in range(version + 1, len(MIGRATIONS) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split_sql(MIGRATIONS[number - 1]):
                conn.execute(statement)
            if number == 1:
                conn.execute("INSERT INTO meta (key, value) VALUES ('epoch', ?), ('cursor_key', ?)",
                             (secrets.token_bytes(8), secrets.token_bytes(32)))
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _split_sql(script: str) -> list[str]:
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements


def _load_meta(conn: sqlite3.Connection) -> tuple[bytes, bytes]:
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    return bytes(meta["epoch"]), bytes(meta["cursor_key"])
