"""Group commit: every store operation of the app goes through one writer, many per transaction.

Operations submitted while a batch is being committed wait for the next batch, so under load one COMMIT
(one fsync of the WAL, synchronous=FULL) serves many callers; alone, a call pays one commit as before.
A caller learns its result only after the COMMIT that made it durable returned.

Cancelling a caller never cancels its operation: once submitted, it runs and commits (a client timeout
cancels the client's wait, never admitted work).

Where the work runs (measured with scripts/bench.py, docs/benchmarks.md; a store behind a network round trip runs
whole batches on the worker thread instead, and answers the first look of a wait, when it needs no write, from its
read-only wait reader on the loop, beside the writer: `wait_reader`): a batch's operations run on the event loop, and
only a COMMIT that has something to make durable runs on a worker thread. A thread hop costs ~0.2 ms on
this 2-core VM (anyio.to_thread round trip, median), more than the statements of a typical operation
(10-100 µs), and `mailbox/wait` makes two store calls: running everything on the worker made its round
trip 0.90 ms, running the operations inline makes it ~0.3 ms. A read-only batch commits inline (there is
nothing to fsync). The COMMIT of a batch that wrote stays on the worker so the loop keeps reading requests
while the WAL is fsynced, which is what lets the next batch grow (group commit). A call that finds the
writer idle is a batch of one run in the caller's own task (no hand-over to the writer task and back), and
when nothing else waits for the writer its COMMIT runs inline too: a lone write then pays no thread hop
(0.1-0.3 ms here, more under load), and whatever arrives during its fsync forms the next batch.
The cost: the loop does not serve sockets while a batch's statements run (a 100-record page at 1M
records: ~0.6 ms).

A batch on a store behind a network round trip takes a millisecond or more, so there the idle fast path would split
a steady load in two: the first caller back after a batch runs alone (nothing else is pending yet) while the others
gather behind it, two transactions for every round of callers (docs/benchmarks.md, "One transaction per round of
callers"). There, once more than one caller was active around the last batch, the next one waits at most
`FILL_WAIT_S` until as many operations are pending (not when an urgent one is), and the fast path is taken only by a
caller that was alone. A lone caller never waits.

Only the app writes this database, but another process may take its write lock (an `sqlite3` shell, a backup, a
`PRAGMA wal_checkpoint(TRUNCATE)`). SQLite's own busy handler would sleep on the loop, so the store gives up after a
few ms (`StoreBusy`, the batch rolled back whole) and the writer waits here instead, off the loop, with backoff, and
runs the whole batch again: other requests are served meanwhile and later operations queue for the next batch. Only
a lock held past `BUSY_DEADLINE_S` reaches the callers, as `storage_unavailable` with nothing admitted; the bound is
below the client's default call timeout (`wardian.client.DEFAULT_CALL_TIMEOUT_S`), so a caller gets that answer
rather than an uncertain time-out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple

import anyio

from wardian import errors
from wardian.store import BatchResult, Store, StoreBusy
from wardian.store.api import Call, WaitReader

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
log = logging.getLogger("wardian.app.writer")

# One batch at most this many operations, so a burst cannot hold the writer (and the loop) for long.
MAX_BATCH = 256

# How long a batch waits for a write lock another process holds before its callers are refused; and the pauses
# between its attempts (doubling from the first to the longest).
BUSY_DEADLINE_S = 20.0
BUSY_FIRST_PAUSE_S = 0.001
BUSY_LONGEST_PAUSE_S = 0.05

# A store behind a network round trip: how long a batch waits at most for as many operations as were active around
# the last one (see the module docstring); below that store's round trip, far below its batch.
FILL_WAIT_S = 0.0005

_Pending = tuple[Call, bool, "asyncio.Future[BatchResult]"]


def _outcome(result: BatchResult) -> Any:
    """An operation's value, or its error raised."""
    if result.error is not None:
        raise result.error
    return result.value


class StoreWriter:
    """Runs store operations in batches: statements on the event loop, a durable COMMIT on one worker thread."""

    def __init__(self, store: Store, *, busy_deadline_s: float = BUSY_DEADLINE_S) -> None:
        self._store = store
        self._busy_deadline_s = busy_deadline_s
        self._pending: list[_Pending] = []
        self._wakeup = anyio.Event()
        self._closed = False
        self._busy = False  # a batch is between BEGIN and the end of its COMMIT
        self._limiter = anyio.CapacityLimiter(1)
        self._fills = not store.inline_statements
        self._active = 0  # the operations of the last batch and those that arrived while it ran
        self._urgent = False  # an urgent operation waits in `_pending`
        self.batches = 0
        self.operations = 0
        # Called after every batch whose COMMIT made a change durable (the app's `ChangeFeed`, for live views).
        self.on_commit: Callable[[], None] | None = None
        # The store's read-only first look of waits, beside this writer (None: every look is the writer's; see
        # `Backend.wait_reader`).
        self.wait_reader: WaitReader | None = store.backend.wait_reader()

    async def call(self, fn: Callable[[Store, *Ts], T], *args: *Ts, bare: bool = False, urgent: bool = False) -> T:
        """Run `fn(store, *args)` inside the next batch's transaction and return its result after COMMIT (in the shape
        of anyio's `to_thread.run_sync(fn, *args)`: the call site names the operation and its arguments, and the type
        checker checks them).

        `bare`: run it without a savepoint of its own (see `Store.begin_batch`). `urgent`: a write a delivery waits
        on (the dispatch claim): it goes to the front of the queue, and alone it commits on the loop with no yield
        after its COMMIT (its caller writes to a provider next and then waits anyway).
        """
        if self._closed:
            raise errors.StorageUnavailable("the app is shutting down; nothing was admitted")
        if not self._busy and not self._pending and (not self._fills or self._active <= 1 or urgent):
            # The writer is idle: this call is a batch of one, run in the caller's own task, which saves
            # the hand-over to the writer task and back (and, for a read, every await).
            self._busy = True
            try:
                return _outcome((await self._execute([(fn, args)], [bare], inline=urgent))[0])
            finally:
                self._busy = False
                self._active = 1 + len(self._pending)
                if self._pending:
                    self._wakeup.set()
        # A bare future, not an anyio.Event: one is made per call and the event costs 5x more here.
        done: asyncio.Future[BatchResult] = asyncio.get_running_loop().create_future()
        if urgent:
            self._pending.insert(0, ((fn, args), bare, done))
            self._urgent = True
        else:
            self._pending.append(((fn, args), bare, done))
        self._wakeup.set()
        with anyio.CancelScope(shield=True):
            # Shielded: the operation runs whatever happens to the caller; the caller may still be
            # cancelled right after, but only after the outcome is final.
            return _outcome(await done)
        raise AssertionError("unreachable: nothing cancels this shielded scope, so it swallows nothing")

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The writer loop; returns after `close()` once every submitted operation has finished."""
        task_status.started()
        while True:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
            while self._pending and not self._busy:  # busy: a caller runs a batch of one; it wakes us after
                self._busy = True
                try:
                    if self._fills and len(self._pending) < self._active:
                        await self._fill()
                    batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                    self._urgent = False
                    results = await self._execute([op[0] for op in batch], [op[1] for op in batch])
                finally:
                    self._busy = False
                self._active = len(batch) + len(self._pending)
                for (_, _, done), result in zip(batch, results, strict=True):
                    if not done.done():  # a caller cancelled natively (not through anyio) left no one to tell
                        done.set_result(result)
            if self._closed and not self._pending:
                return

    async def _fill(self) -> None:
        """Wait, at most `FILL_WAIT_S`, until as many operations are pending as were active around the last batch (a
        store behind a network round trip; see the module docstring), or an urgent one is, or the writer closes.
        Shielded, as the batch that follows is: operations already submitted run whatever happens to the writer."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(FILL_WAIT_S):
            while len(self._pending) < self._active and not self._urgent and not self._closed:
                await self._wakeup.wait()
                self._wakeup = anyio.Event()

    async def _execute(self, calls: list[Call], bare: list[bool], *, inline: bool = False) -> list[BatchResult]:
        """One batch, run again whole while another process holds the store's write lock, up to the bound (see the
        module docstring). Shielded: once begun, the batch ends, and its callers learn its final outcome."""
        with anyio.CancelScope(shield=True):
            give_up = anyio.current_time() + self._busy_deadline_s
            pause = BUSY_FIRST_PAUSE_S
            while True:
                try:
                    return await self._attempt(calls, bare, inline=inline)
                except StoreBusy:
                    if anyio.current_time() >= give_up:
                        break
                await anyio.sleep(pause)
                pause = min(pause * 2, BUSY_LONGEST_PAUSE_S)
        log.warning("the store's write lock was held by another process for more than %s s", self._busy_deadline_s)
        refused = errors.StorageUnavailable(
            f"another process held the store's write lock for more than {self._busy_deadline_s:g} s; nothing was "
            "admitted. Stop whatever else has wardian.db open (a shell, a backup), then try again")
        return self._finish(calls, [BatchResult(None, refused) for _ in calls], wrote=False)

    async def _attempt(self, calls: list[Call], bare: list[bool], *, inline: bool = False) -> list[BatchResult]:
        """One try of a batch: statements here on the loop; a COMMIT that wrote on the worker thread (shielded), unless
        it is a lone write with nothing waiting, which commits here (see the module docstring).

        Raises: StoreBusy (the batch rolled back whole)."""
        store = self._store
        if not store.inline_statements:
            # A store behind a network round trip (PostgreSQL): the whole batch, statements and COMMIT, runs on
            # the worker thread, so the loop serves sockets while the batch waits on the server. Shielded: once
            # begun, the batch ends, and its callers learn its final outcome.
            wrote_box: list[bool] = []

            def whole_batch() -> list[BatchResult]:
                begun = store.begin_batch(calls, bare)
                wrote_box.append(store.batch_wrote)
                return store.commit_batch(begun)

            results: list[BatchResult] = []
            with anyio.CancelScope(shield=True):
                results = await anyio.to_thread.run_sync(whole_batch, limiter=self._limiter)
            return self._finish(calls, results, wrote=bool(wrote_box and wrote_box[0]))
        results = store.begin_batch(calls, bare)
        wrote = store.batch_wrote
        if not wrote:
            results = store.commit_batch(results)
        elif len(calls) > 1 or self._pending:
            with anyio.CancelScope(shield=True):
                results = await anyio.to_thread.run_sync(store.commit_batch, results, limiter=self._limiter)
        else:
            results = store.commit_batch(results)
            # A lone write committed without leaving the loop; let whatever became ready meanwhile (a
            # notification, another request) run before the caller goes on, so a chain of writes (the
            # dispatcher's, the completion observer's) never starves the loop. Shielded: the outcome is final.
            # Not after an urgent write: its caller writes to a provider next and then waits anyway.
            if not inline:
                with anyio.CancelScope(shield=True):
                    await anyio.lowlevel.checkpoint()
        return self._finish(calls, results, wrote=wrote)

    def _finish(self, calls: list[Call], results: list[BatchResult], *, wrote: bool) -> list[BatchResult]:
        self.batches += 1
        self.operations += len(calls)
        if wrote and self.on_commit is not None:
            self.on_commit()
        for i, result in enumerate(results):
            if result.error is not None and not isinstance(result.error, errors.WardianError):
                log.error("store operation failed", exc_info=result.error)
                results[i] = BatchResult(None, errors.InternalError(
                    f"internal store error: {type(result.error).__name__}"))
        return results

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()
