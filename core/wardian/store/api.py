"""The store seam: the one interface the app uses, which every backend implements (SQLite, PostgreSQL).

The app runs store operations as plain functions of a `Store` and their other arguments (a `Call`) through its writer
(`wardian.app.writer`), many per transaction (group commit). A backend speaks records (`wardian.model`) and the
domain errors of `wardian.errors`; no connection, cursor or row ever leaves the store package.

Invariants every backend keeps:
- Every change runs inside `atomic()`; nested, it is a savepoint. A caller learns an outcome only after the
  COMMIT that made it durable returned (the writer's batches end in `commit_batch`).
- Claims, acknowledgements and completions are conditional updates checked by their row count, so exactly one
  claimer or replier wins, whatever runs concurrently.
- Text is stored exactly as given; nothing trims, normalises or re-encodes it.
- The task ledger (`TaskLedger`) is the only writer of a task's delivery facts, and its `_complete` the only
  writer of a reply: an explicit reply, a published turn outcome and a Wardian failure notice take the same path.
- The store writes no prose for people: notices' texts come from the app.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from wardian import errors
from wardian.model import Caller
from wardian.store.contracts import History, Hosts, LostTasks, Mailbox, Pushable, Roster, SessionKind, TaskLedger
from wardian.store.events import InterruptAnnounced, RecordAnnounced, Resynced, StoreEvent

__all__ = [
    "BatchResult",
    "Call",
    "History",
    "Hosts",
    "InterruptAnnounced",
    "Mailbox",
    "Pushable",
    "RecordAnnounced",
    "Resynced",
    "Roster",
    "SessionKind",
    "Store",
    "StoreBusy",
    "StoreEvent",
    "TaskLedger",
    "WaitLook",
    "WaitReader",
]


class StoreBusy(errors.StorageUnavailable):
    """Another process holds the database's write lock: the batch was rolled back whole (nothing of it stands) and
    may run again once the lock is free. The app's writer waits and retries (`wardian.app.writer`); anything else
    sees an ordinary `storage_unavailable`."""


# One operation of a batch: a function of the store and its other arguments, run as `fn(store, *args)`.
Call = tuple[Callable[..., Any], tuple[Any, ...]]


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
        """Raises: what `Store.authenticate(token)` raises."""
        ...

    async def close(self) -> None: ...


class Store(Hosts, Roster, Mailbox, History, TaskLedger, LostTasks, Protocol):
    """One home's interaction store, as the app's writer drives it: its parts, each also answered by the store."""

    @property
    def roster(self) -> Roster: ...

    @property
    def mailbox(self) -> Mailbox: ...

    @property
    def history(self) -> History: ...

    @property
    def ledger(self) -> TaskLedger: ...

    @property
    def leases(self) -> Hosts:
        """The hosts part (`hosts()` is its listing of every host, so the part has another name)."""
        ...

    @property
    def home_tag(self) -> str:
        """A short public tag of this store, embedded in session tokens to spot another home's token."""
        ...

    @property
    def epoch(self) -> bytes:
        """This store's identity since its creation (cursors of an earlier store are stale)."""
        ...

    @property
    def inline_statements(self) -> bool:
        """Whether a batch's statements are cheap enough to run on the app's event loop (an embedded engine);
        False for a store behind a network round trip."""
        ...

    def close(self) -> None: ...

    def wait_reader(self) -> WaitReader | None:
        """The store's reader for the first look of waits, used by the app on its event loop (None: the writer looks,
        as on the embedded store, whose statements run on the loop anyway)."""
        ...

    def atomic(self) -> AbstractContextManager[None]:
        """One transaction or, nested, one savepoint, around several operations."""
        ...

    def begin_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None = None) -> list[BatchResult]:
        """Run `calls` in one open transaction, each in its own savepoint unless `bare`; results are final only
        once `commit_batch` returned them."""
        ...

    @property
    def batch_wrote(self) -> bool:
        """Whether the open batch changed anything (its COMMIT then has something to make durable)."""
        ...

    def commit_batch(self, results: list[BatchResult]) -> list[BatchResult]:
        """COMMIT the open batch; if that fails, every operation fails with the storage error."""
        ...

    def run_batch(self, calls: Sequence[Call], bare: Sequence[bool] | None = None) -> list[BatchResult]: ...

    def integrity_check(self) -> str: ...

