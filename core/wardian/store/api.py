"""The store's seam: what a backend supplies (`Backend`), and what crosses it (`Db`, `Call`, `BatchResult`).

A store (`wardian.store.engine.Store`) is written once over any backend: its parts (`roster`, `mailbox`, `history`,
`ledger`, `hosts`, `lost`) are plain functions of the store, and its transactions (`atomic`, the group-commit
batches) are the store's own. A backend supplies only what really differs: its connection, as the `Db` the parts
run their statements on; the roster cache that is valid for it; the store's identity; and the primitives of its
transactions (how one begins, whether it wrote, whether the database aborted it by itself, what a driver error
means). Why: docs/decisions/0024-one-store-over-a-backend.md. The app runs each operation through its writer
(`wardian.app.writer`) as `writer.call(fn, *args)`, many per transaction. A store speaks records (`wardian.model`) and
the domain errors of `wardian.errors`; no cursor or row ever leaves the store package, and no connection except
through the tests' backdoor (`wardian.store.testing`).

Invariants every backend keeps:
- Every change runs inside `atomic()`; nested, it is a savepoint. A caller learns an outcome only after the
  COMMIT that made it durable returned (the writer's batches end in `commit_batch`).
- Claims, acknowledgements and completions are conditional updates checked by their row count, so exactly one
  claimer or replier wins, whatever runs concurrently.
- Text is stored exactly as given; nothing trims, normalises or re-encodes it.
- The task ledger (`wardian.store.ledger`) is the only writer of a task's delivery facts, and its `_complete` the
  only writer of a reply: an explicit reply, a published turn outcome and a Wardian failure notice take the same path.
- The store writes no prose for people: notices' texts come from the app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from wardian import errors
from wardian.model import Caller
from wardian.store.cache import RosterCache
from wardian.store.events import InterruptAnnounced, RecordAnnounced, Resynced, StoreEvent

__all__ = [
    "Backend",
    "BatchResult",
    "Call",
    "Db",
    "InterruptAnnounced",
    "Pushable",
    "RecordAnnounced",
    "Resynced",
    "SessionKind",
    "StoreBusy",
    "StoreEvent",
    "Transaction",
    "WaitLook",
    "WaitReader",
]

# Whether a record for this recipient (an agent's UUID) is admitted for a push into its live conversation.
Pushable = Callable[[str], bool]
# operator: minted by `wardian agent env` (valid until revoked); managed: minted by a start for its generation.
SessionKind = Literal["operator", "managed"]
# One operation of a batch: a function of the store and its other arguments, run as `fn(store, *args)`.
Call = tuple[Callable[..., Any], tuple[Any, ...]]
# What `Backend.watch` gives where nothing is watched: one shared, stateless context (not one made per transaction).
_UNWATCHED: AbstractContextManager[None] = nullcontext()


class StoreBusy(errors.StorageUnavailable):
    """Another process holds the database's write lock: the batch was rolled back whole (nothing of it stands) and
    may run again once the lock is free. The app's writer waits and retries (`wardian.app.writer`); anything else
    sees an ordinary `storage_unavailable`."""


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The outcome of one operation of a batch: exactly one of `value` and `error` is meaningful."""

    value: Any
    error: BaseException | None


class WaitLook(NamedTuple):
    """What a wait's first look found: the caller its session speaks for, and whether a record waits to be received."""

    caller: Caller
    pending: bool


class WaitReader(Protocol):
    """A shared store's fast path for the first look of a `mailbox/wait`, on the event loop beside the writer
    (`wardian.store.postgres.wait_reader`): it only reads, and answers only what the writer's look would answer
    without writing; None means the writer must look."""

    async def keep(self, ready: Callable[[], None]) -> None:
        """Keep its connection open until cancelled; `ready()` once the first attempt to open it ended."""
        ...

    async def look(self, token: str) -> WaitLook | None:
        """Raises: what `roster.authenticate(store, token)` raises."""
        ...

    async def close(self) -> None: ...


class Db(Protocol):
    """The part of a DB-API connection the parts use, on the connection of the moment.

    `write` runs a statement that changes rows. The split is what a shared store needs: there every transaction
    takes the append lock before its first write (`lock_appends`), so the parts say which statements write
    instead of the backend guessing it from their text. On SQLite `write` is `execute`.
    """

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...

    def write(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...


class Transaction(Protocol):
    """What a backend's own way of running a batch (`Backend.pipelined_batch`) drives of the store's transaction."""

    depth: int

    def run_call(self, call: Call, bare: bool) -> Any: ...

    def undo(self, depth: int) -> None: ...


class Backend(Protocol):
    """What a backend supplies to its store (`wardian.store.engine.Store`); the store writes the rest once.

    Not thread-safe: one caller at a time (the app's writer, which may run a batch's COMMIT on a worker thread)."""

    db: Db  # the parts' statements: the same object for the store's life, whatever connection is under it
    cache: RosterCache  # the roster cache that stays valid for this backend (`wardian.store.cache`)
    epoch: bytes  # the store's identity since its creation (cursors of an earlier store are stale)
    cursor_key: bytes  # the key of its cursors' MACs
    inline_statements: bool  # statements cheap enough to run on the app's event loop (an embedded database)
    driver_error: type[Exception]  # the driver's base error class (what a rollback attempt may raise)

    def errors(self) -> AbstractContextManager[None]:
        """Translate driver errors into storage errors."""
        ...

    def operation_errors(self) -> AbstractContextManager[None]:
        """What wraps an operation's own statements inside `atomic`."""
        ...

    def begin(self) -> None:
        """Open the outermost transaction (inside `errors`)."""
        ...

    def control(self, sql: str) -> None:
        """Run one transaction-control statement (SAVEPOINT, RELEASE, ROLLBACK, COMMIT) of the store's own text."""
        ...

    def can_roll_back(self) -> bool:
        """Whether a rollback can still run (a transaction is open and the connection is alive)."""
        ...

    def wrote(self) -> bool:
        """Whether the open transaction changed anything (its COMMIT then has something to make durable)."""
        ...

    def batch_aborted(self) -> bool:
        """After an operation failed: whether the whole transaction is lost (the database rolled it back, or the
        connection broke), so nothing of the batch stands."""
        ...

    def clock_ms(self) -> int:
        """Now, in Unix ms, on the clock every host of this store shares."""
        ...

    def integrity_check(self) -> str:
        """"ok", or what the database found wrong with itself."""
        ...

    def close(self) -> None: ...

    # --- what most backends leave as it is ------------------------------------------------------------

    def watch(self) -> AbstractContextManager[None]:
        """Around each call into the database (a transaction, a batch, its COMMIT): a bound on how long it may wait
        for a server that stopped answering."""
        return _UNWATCHED

    def pipelined_batch(self, tx: Transaction, calls: Sequence[Call],
                        bare: Sequence[bool] | None) -> list[BatchResult] | None:
        """Run a batch up to its COMMIT the backend's own faster way; None: the store runs it, op by op."""
        return None

    def abort_error(self, exc: Exception) -> BaseException:
        """The error every operation of an aborted batch reports."""
        return exc

    def commit_failed(self, exc: Exception, wrote: bool) -> None:
        """A COMMIT raised `exc`: raise the error it means when that is not "nothing was committed"."""
        return None

    def before_commit(self) -> None:
        """Checks a batch that wrote must pass before its COMMIT. Raises: a storage error (nothing is committed)."""
        return None

    def index_hint(self, index: str) -> str:
        """A clause that makes the backend read `index` for the table named before it ("" where there is none)."""
        return ""

    def wait_reader(self) -> WaitReader | None:
        """The backend's reader for the first look of waits, used by the app on its event loop (None: the writer
        looks, as on the embedded store, whose statements run on the loop anyway)."""
        return None
