"""The store over a backend: the state its parts share and its transactions, written once for every backend.

`Store` holds a backend (`wardian.store.api.Backend`: SQLite, PostgreSQL) and never is one: a backend supplies its
connection and the few transaction primitives that differ, and the store runs `atomic` and the group-commit batches
with them. The parts (`roster`, `mailbox`, `history`, `ledger`, `hosts`, `lost`) are plain functions of a `Store`;
the app's writer runs each as `fn(store, *args)` inside a batch (`writer.call(ledger.claim_task, ...)`).

Invariants:
- Every change runs inside `atomic()`: a transaction at the outside (the backend's `begin`), a SAVEPOINT when nested.
  `begin_batch` wraps many operations in one transaction, each in its own savepoint, so one failing operation never
  takes its neighbours down (group commit).
- A caller learns an outcome only after COMMIT returned (`commit_batch`): an acknowledged record is durable.
- Every path that ends a transaction or savepoint without COMMIT/RELEASE forgets the roster cache (`undo`): a cache
  filled inside a transaction that did not commit must not outlive it.
- Driver errors become storage errors in the backend (`Backend.errors`); nothing driver-specific leaves the store.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from wardian import errors
from wardian.store.api import Backend, BatchResult, Call, StoreBusy
from wardian.store.tokens import CursorCodec, TokenDigests


class Store:
    """One home's interaction store over one backend. Not thread-safe: one caller at a time (the app's writer, which
    may run a batch's COMMIT on a worker thread)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        # Plain attributes, read by every statement of every part: the backend's `db` stays the same object.
        self.db = backend.db
        self.cache = backend.cache
        self.inline_statements = backend.inline_statements
        self.epoch = backend.epoch
        self.home_tag = backend.epoch.hex()[:8]  # a short public tag, embedded in session tokens of this store
        self.cursors = CursorCodec(backend.epoch, backend.cursor_key)
        self.digests = TokenDigests(self.home_tag)  # one per caller thread: the writer's
        self.depth = 0  # open transaction (1) and savepoints (more) of `atomic`; 0 outside any transaction
        self.host: str | None = None  # the host this store session serves (set by `hosts.claim_host`)
        self.lease_owner: str | None = None  # this app's token in the host's lease (set with `host`)

    def close(self) -> None:
        """The store's owner ends it without knowing its backend (a boundary, not a forward: its only caller is
        whoever opened the store)."""
        self.backend.close()

    # --- transactions ---------------------------------------------------------------------------------

    def undo(self, depth: int) -> None:
        """End the transaction (`depth` 0) or savepoint `depth` without committing; the original error matters, so
        a failing rollback is ignored (the database may already have rolled everything back)."""
        self.cache.clear()
        backend = self.backend
        if backend.can_roll_back():
            with suppress(backend.driver_error):
                if depth == 0:
                    backend.control("ROLLBACK")
                else:
                    backend.control(f"ROLLBACK TO SAVEPOINT sp{depth}")
                    backend.control(f"RELEASE SAVEPOINT sp{depth}")

    def _commit(self, wrote: bool) -> None:
        """COMMIT the outermost transaction (inside `errors`); on failure roll back and raise."""
        try:
            self.backend.control("COMMIT")
        except self.backend.driver_error as exc:
            self.backend.commit_failed(exc, wrote)
            self.undo(0)
            raise

    @contextmanager
    def atomic(self) -> Generator[None]:
        """One transaction or, nested, one savepoint."""
        backend = self.backend
        with backend.watch():
            with backend.errors():
                if self.depth == 0:
                    backend.begin()
                else:
                    backend.control(f"SAVEPOINT sp{self.depth}")
            self.depth += 1
            try:
                with backend.operation_errors():
                    yield
            except BaseException:
                self.depth -= 1
                self.undo(self.depth)
                raise
            self.depth -= 1
            with backend.errors():
                if self.depth == 0:
                    self._commit(backend.wrote())
                else:
                    backend.control(f"RELEASE SAVEPOINT sp{self.depth}")

    def run_call(self, call: Call, bare: bool) -> Any:
        """One operation of a batch: `fn(store, *args)` in its own savepoint, or `bare` (see `begin_batch`)."""
        fn, args = call
        if bare:
            with self.backend.errors():
                return fn(self, *args)
        with self.atomic():
            return fn(self, *args)

    def begin_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None = None) -> list[BatchResult]:
        """`run_batch` up to its COMMIT: the transaction, then each call `fn(store, *args)` in its own savepoint.

        `bare[i]` runs call i without a savepoint of its own: only for an operation whose writes all happen in one store
        function (which is atomic by itself) after its reads, so a failure leaves nothing behind (saves two statements
        per operation on the send path). The transaction stays open for `commit_batch`; results are final only once
        `commit_batch` returned them. If the database aborted the whole transaction, every result already carries that
        error and no transaction is left open. A backend may run the batch its own faster way
        (`Backend.pipelined_batch`).

        Raises: StoreBusy when another process holds the database (at BEGIN or in any op): the whole batch is rolled
        back first, so it may run again whole.
        """
        with self.backend.watch():
            results = self.backend.pipelined_batch(self, calls, bare)
            return results if results is not None else self._begin_batch(calls, bare)

    def _begin_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None) -> list[BatchResult]:
        backend = self.backend
        try:
            with backend.errors():
                backend.begin()
        except StoreBusy:
            raise
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in calls]
        self.depth = 1
        results: list[BatchResult] = []
        try:
            for i, call in enumerate(calls):
                try:
                    value = self.run_call(call, bare is not None and bare[i])
                except Exception as exc:
                    if isinstance(exc, StoreBusy):
                        raise
                    if backend.batch_aborted():
                        self.depth = 0
                        self.undo(0)
                        error = backend.abort_error(exc)
                        return [BatchResult(None, error) for _ in calls]
                    results.append(BatchResult(None, exc))
                else:
                    results.append(BatchResult(value, None))
        except BaseException:
            self.depth = 0
            self.undo(0)
            raise
        return results

    @property
    def batch_wrote(self) -> bool:
        """Whether the open batch changed anything (its COMMIT then has something to make durable)."""
        return self.depth > 0 and self.backend.wrote()

    def commit_batch(self, results: list[BatchResult]) -> list[BatchResult]:
        """COMMIT the batch `begin_batch` left open and return its final results.

        If the COMMIT fails, every operation fails with that storage error (nothing of the batch stands); the backend
        may turn a COMMIT whose answer was lost into another error for all of them (`commit_failed`).

        Raises: StoreBusy when another process held the database at COMMIT: nothing was committed and the batch is
        rolled back, so it may run again whole.
        """
        if self.depth == 0:
            return results  # begin_batch failed or the database aborted the batch: the errors are in `results`
        self.depth = 0
        backend = self.backend
        wrote = backend.wrote()
        try:
            with backend.watch(), backend.errors():
                try:
                    if wrote:
                        backend.before_commit()  # a read-only batch promises nothing
                    self._commit(wrote)
                except errors.WardianError:
                    self.undo(0)
                    raise
        except StoreBusy:
            raise
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in results]
        return results

    def run_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None = None) -> list[BatchResult]:
        """Run `calls` in one transaction (group commit): each in its own savepoint, one COMMIT for all. If the COMMIT
        itself fails, every operation of the batch fails with that storage error."""
        return self.commit_batch(self.begin_batch(calls, bare))
