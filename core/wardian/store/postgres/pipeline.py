"""A batch in one pipeline: its statements sent together, waited for only where an operation reads a result.

Every statement to a shared store is a round trip; a batch of 32 sends used to be about 100 of them (BEGIN, per
operation the session, the target, the INSERT, a savepoint and its release, then COMMIT). In psycopg's pipeline mode
(https://www.psycopg.org/psycopg3/docs/advanced/pipeline.html) BEGIN, the roster's version (`roster_cache`), the
append lock, each savepoint and each INSERT whose result nobody reads are queued and sent at once; a read an
operation needs (an uncached session, say) flushes what is queued. A batch that wrote then commits as before; a
batch that only read queues its COMMIT with the rest.

In a pipeline the server skips everything after a failed statement, and psycopg may report that error in a later
statement's call, so which operation failed is not known there. A batch in which any statement failed is rolled back
whole and run again the old way, each operation in its own savepoint, so the operation that failed fails alone and
the others stand (`Engine.begin_batch`). So is a batch that answered from a roster entry whose version moved. A batch
whose connection broke reports the error to every operation: nothing of it was committed (COMMIT was not sent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import pq

from wardian import errors
from wardian.store.api import BatchResult

if TYPE_CHECKING:
    from wardian.store.postgres.engine import PgEngine

S = TypeVar("S")


def run_pipelined(
    engine: PgEngine, ops: Sequence[Callable[[S], Any]], bare: Sequence[bool] | None, store: S
) -> list[BatchResult] | None:
    """`begin_batch` in one pipeline; None when the batch must run again op by op (nothing of it stands)."""
    try:
        with engine.errors():
            engine.ensure_connected()
    except errors.WardianError as exc:
        return [BatchResult(None, exc) for _ in ops]
    cache, db = engine.roster_cache, engine.pg_db
    cache.begin()
    engine.pipeline_failed = False
    results: list[BatchResult] = []
    version: Any = None
    lost: psycopg.Error | None = None
    try:
        with engine.conn.pipeline() as pipe:
            db.pipe = pipe
            engine.conn.execute("BEGIN")
            db.wrote, db.appends = False, []
            version = engine.conn.execute("SELECT v FROM roster_version")
            engine.depth = 1
            _run_ops(engine, ops, bare, store, results)
            if not engine.pipeline_failed:
                db.flush()
            if not engine.pipeline_failed and not db.wrote:
                engine.conn.execute("COMMIT")  # only read: it ends in the same round trip
                engine.depth = 0
    except psycopg.Error as exc:
        engine.pipeline_failed, lost = True, exc
    except BaseException:
        db.pipe = None
        cache.settle(None)
        engine.depth = 0
        engine.undo(0)
        raise
    finally:
        db.pipe = None
        db.appends.clear()
    return _settle(engine, len(ops), results, version, lost)


def _run_ops(engine: PgEngine, ops: Sequence[Callable[[S], Any]], bare: Sequence[bool] | None, store: S,
             results: list[BatchResult]) -> None:
    for i, op in enumerate(ops):
        try:
            value = engine.run_op(op, store, bare is not None and bare[i])
        except psycopg.Error:
            engine.pipeline_failed = True
            return
        except Exception as exc:
            if engine.pipeline_failed:
                return
            results.append(BatchResult(None, exc))
        else:
            results.append(BatchResult(value, None))


def _settle(engine: PgEngine, n: int, results: list[BatchResult], version: Any, lost: psycopg.Error | None
            ) -> list[BatchResult] | None:
    """After the pipeline's last sync: the results, or None to run the batch again op by op."""
    cache = engine.roster_cache
    failed = engine.pipeline_failed or engine.conn.info.transaction_status == pq.TransactionStatus.INERROR
    if failed:
        cache.settle(None)
        engine.depth = 0
        if engine.broken:  # nothing was committed: COMMIT was never sent (a read-only batch promised nothing)
            error = engine.abort_error(lost) if lost is not None else errors.StorageUnavailable(
                "the shared store's connection broke; nothing was admitted")
            return [BatchResult(None, error) for _ in range(n)]
        engine.undo(0)
        return None
    row = version.fetchone() if version is not None else None
    stale = cache.settle(int(row[0]) if row is not None else None)
    if stale:
        if engine.depth:
            engine.depth = 0
            engine.undo(0)
        return None
    return results
