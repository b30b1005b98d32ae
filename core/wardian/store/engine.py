"""The transaction engine: `atomic` and the batches (group commit), written once for every backend.

Invariants:
- Every change runs inside `atomic()`: a transaction at the outside (`_begin`), a SAVEPOINT when nested.
  `begin_batch` wraps many operations in one transaction, each in its own savepoint, so one failing operation never
  takes its neighbours down (group commit).
- A caller learns an outcome only after COMMIT returned (`commit_batch`): an acknowledged record is durable.
- Every path that ends a transaction or savepoint without COMMIT/RELEASE forgets the roster cache (`_undo`): a cache
  filled inside a transaction that did not commit must not outlive it.
- Driver errors become storage errors in the backend (`_errors`); nothing driver-specific leaves the store.

A backend supplies only what really differs: how a transaction begins, whether one is still open, whether the
database aborted it by itself, how a driver error reads, and what a failed COMMIT means (`Engine`'s hooks).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any

from wardian import errors
from wardian.store._sql import Db
from wardian.store.api import BatchResult, Call, StoreBusy
from wardian.store.cache import RosterCache


class Engine(ABC):
    """One connection's transactions (implements `wardian.store._sql.Tx` for the parts). Not thread-safe: one caller
    at a time (the app's writer, which may run a batch's COMMIT on a worker thread)."""

    driver_error: type[Exception]  # the driver's base error class (what a rollback attempt may raise)
    db: Db  # the connection of the moment (a plain attribute: every statement of every part reads it)

    def __init__(self, cache: RosterCache) -> None:
        self.cache = cache
        self.depth = 0  # open transaction (1) and savepoints (more) of `atomic`
        self.host: str | None = None  # the host this store session serves (set by `claim_host`)

    # --- the backend's hooks --------------------------------------------------------------------------

    @abstractmethod
    def errors(self) -> AbstractContextManager[None]:
        """Translate driver errors into storage errors."""

    @abstractmethod
    def operation_errors(self) -> AbstractContextManager[None]:
        """What wraps an operation's own statements inside `atomic`."""

    @abstractmethod
    def begin(self) -> None:
        """Open the outermost transaction (inside `errors`)."""

    @abstractmethod
    def control(self, sql: str) -> None:
        """Run one transaction-control statement (SAVEPOINT, RELEASE, ROLLBACK, COMMIT) of the engine's own text."""

    @abstractmethod
    def can_roll_back(self) -> bool:
        """Whether a rollback can still run (a transaction is open and the connection is alive)."""

    @abstractmethod
    def wrote(self) -> bool:
        """Whether the open transaction changed anything (its COMMIT then has something to make durable)."""

    @abstractmethod
    def batch_aborted(self) -> bool:
        """After an operation failed: whether the whole transaction is lost (the database rolled it back, or the
        connection broke), so nothing of the batch stands."""

    def abort_error(self, exc: Exception) -> BaseException:
        """The error every operation of an aborted batch reports."""
        return exc

    def commit_failed(self, exc: Exception, wrote: bool) -> None:  # noqa: B027  # most backends: nothing to add
        """A COMMIT raised `exc`: raise the error it means when that is not "nothing was committed"."""

    def before_commit(self) -> None:  # noqa: B027  # most backends: nothing to check
        """Checks a batch that wrote must pass before its COMMIT. Raises: a storage error (nothing is committed)."""

    def clock_ms(self) -> int:
        """Now, in Unix ms, on the clock every host of this store shares."""
        raise NotImplementedError

    def index_hint(self, index: str) -> str:
        return ""

    # --- transactions ---------------------------------------------------------------------------------

    def undo(self, depth: int) -> None:
        """End the transaction (`depth` 0) or savepoint `depth` without committing; the original error matters, so
        a failing rollback is ignored (the database may already have rolled everything back)."""
        self.cache.clear()
        if self.can_roll_back():
            with suppress(self.driver_error):
                if depth == 0:
                    self.control("ROLLBACK")
                else:
                    self.control(f"ROLLBACK TO SAVEPOINT sp{depth}")
                    self.control(f"RELEASE SAVEPOINT sp{depth}")

    def commit(self, wrote: bool) -> None:
        """COMMIT the outermost transaction (inside `errors`); on failure roll back and raise."""
        try:
            self.control("COMMIT")
        except self.driver_error as exc:
            self.commit_failed(exc, wrote)
            self.undo(0)
            raise

    @contextmanager
    def atomic(self) -> Generator[None]:
        """One transaction or, nested, one savepoint."""
        with self.errors():
            if self.depth == 0:
                self.begin()
            else:
                self.control(f"SAVEPOINT sp{self.depth}")
        self.depth += 1
        try:
            with self.operation_errors():
                yield
        except BaseException:
            self.depth -= 1
            self.undo(self.depth)
            raise
        self.depth -= 1
        with self.errors():
            if self.depth == 0:
                self.commit(self.wrote())
            else:
                self.control(f"RELEASE SAVEPOINT sp{self.depth}")

    def begin_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None, store: object) -> list[BatchResult]:
        """`run_batch` up to its COMMIT: the transaction, then each call `fn(store, *args)` in its own savepoint (see
        `Store.begin_batch`).

        `bare[i]` runs call i without a savepoint of its own: only for an operation whose writes all happen in one store
        method (which is atomic by itself) after its reads, so a failure leaves nothing behind (saves two statements per
        operation on the send path). The transaction stays open for `commit_batch`. If the database aborted the whole
        transaction, every result already carries that error and no transaction is left open.

        Raises: StoreBusy when another process holds the database (at BEGIN or in any op): the whole batch is rolled
        back first, so it may run again whole.
        """
        try:
            with self.errors():
                self.begin()
        except StoreBusy:
            raise
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in calls]
        self.depth = 1
        results: list[BatchResult] = []
        try:
            for i, call in enumerate(calls):
                try:
                    value = self._run_op(call, store, bare is not None and bare[i])
                except Exception as exc:
                    if isinstance(exc, StoreBusy):
                        raise
                    if self.batch_aborted():
                        self.depth = 0
                        self.undo(0)
                        error = self.abort_error(exc)
                        return [BatchResult(None, error) for _ in calls]
                    results.append(BatchResult(None, exc))
                else:
                    results.append(BatchResult(value, None))
        except BaseException:
            self.depth = 0
            self.undo(0)
            raise
        return results

    def _run_op(self, call: Call, store: object, bare: bool) -> Any:
        fn, args = call
        if bare:
            with self.errors():
                return fn(store, *args)
        with self.atomic():
            return fn(store, *args)

    @property
    def batch_wrote(self) -> bool:
        """Whether the open batch changed anything (its COMMIT then has something to make durable)."""
        return self.depth > 0 and self.wrote()

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
        wrote = self.wrote()
        try:
            with self.errors():
                try:
                    if wrote:
                        self.before_commit()  # a read-only batch promises nothing
                    self.commit(wrote)
                except errors.WardianError:
                    self.undo(0)
                    raise
        except StoreBusy:
            raise
        except errors.WardianError as exc:
            return [BatchResult(None, exc) for _ in results]
        return results
