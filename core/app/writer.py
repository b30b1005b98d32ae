"""Group commit: every store operation of the app goes through one thread, many per transaction.

Operations submitted while a batch is being written wait for the next batch, so under load one COMMIT
(one fsync of the WAL, synchronous=FULL) serves many callers; alone, a call pays one commit as before.
A caller learns its result only after the COMMIT that made it durable returned.

Cancelling a caller never cancels its operation: once submitted, it runs and commits (a client timeout
cancels the client's wait, never admitted work).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from wardian import errors
from wardian.store import InteractionStore

T = TypeVar("T")
log = logging.getLogger("wardian.app.writer")

# One batch at most this many operations, so a burst cannot hold the writer (and readers) for long.
MAX_BATCH = 512


class _Op:
    __slots__ = ("done", "error", "fn", "value")

    def __init__(self, fn: Callable[[InteractionStore], Any]) -> None:
        self.fn = fn
        self.done = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class StoreWriter:
    """Runs store operations in batches on one worker thread (the store's single writer)."""

    def __init__(self, store: InteractionStore) -> None:
        self._store = store
        self._pending: list[_Op] = []
        self._wakeup = anyio.Event()
        self._closed = False
        self._limiter = anyio.CapacityLimiter(1)
        self.batches = 0
        self.operations = 0

    async def call(self, fn: Callable[[InteractionStore], T]) -> T:
        """Run `fn(store)` inside the next batch's transaction and return its result after COMMIT."""
        if self._closed:
            raise errors.StorageUnavailable("the app is shutting down; nothing was admitted")
        op = _Op(fn)
        self._pending.append(op)
        self._wakeup.set()
        with anyio.CancelScope(shield=True):
            # Shielded: the operation runs whatever happens to the caller; the caller may still be
            # cancelled right after, but only after the outcome is final.
            await op.done.wait()
        if op.error is not None:
            raise op.error
        return op.value  # type: ignore[no-any-return]

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The writer loop; returns after `close()` once every submitted operation has finished."""
        task_status.started()
        while True:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                with anyio.CancelScope(shield=True):
                    results = await anyio.to_thread.run_sync(self._store.run_batch, [op.fn for op in batch],
                                                             limiter=self._limiter)
                self.batches += 1
                self.operations += len(batch)
                for op, result in zip(batch, results, strict=True):
                    op.value, op.error = result.value, result.error
                    if result.error is not None and not isinstance(result.error, errors.WardianError):
                        log.error("store operation failed", exc_info=result.error)
                        op.error = errors.InternalError(f"internal store error: {type(result.error).__name__}")
                    op.done.set()
            if self._closed:
                return

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()
