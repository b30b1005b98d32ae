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
the others stand (`Store.begin_batch`). So is a batch that answered from a roster entry whose version moved. A batch
whose connection broke reports the error to every operation: nothing of it was committed (COMMIT was not sent).

It runs on the store's connection (`connection.PgConnection`) and drives the store's transaction
(`wardian.store.api.Transaction`); it knows nothing of the backend that calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from wardian import errors
from wardian.store.api import BatchResult, Call, Transaction
from wardian.store.postgres.connection import PgConnection
from wardian.store.postgres.roster_cache import VersionedRosterCache


def run_pipelined(link: PgConnection, cache: VersionedRosterCache, tx: Transaction, calls: Sequence[Call],
                  bare: Sequence[bool] | None) -> list[BatchResult] | None:
    """`begin_batch` in one pipeline; None when the batch must run again op by op (nothing of it stands)."""
    try:
        with link.errors():
            link.ensure_connected()
    except errors.WardianError as exc:
        return [BatchResult(None, exc) for _ in calls]
    db = link.db
    cache.begin()
    db.failed = False
    results: list[BatchResult] = []
    version: Any = None
    lost: psycopg.Error | None = None
    try:
        with link.conn.pipeline() as pipe:
            db.pipe = pipe
            link.conn.execute("BEGIN")
            db.wrote, db.appends = False, []
            version = link.conn.execute("SELECT v FROM roster_version")
            tx.depth = 1
            _run_ops(link, tx, calls, bare, results)
            if not db.failed:
                db.flush()
            if not db.failed and not db.wrote:
                link.conn.execute("COMMIT")  # only read: it ends in the same round trip
                tx.depth = 0
    except psycopg.Error as exc:
        db.failed, lost = True, exc
    except BaseException:
        db.pipe = None
        cache.settle(None)
        tx.depth = 0
        tx.undo(0)
        raise
    finally:
        db.pipe = None
        db.appends.clear()
    return _settle(link, cache, tx, len(calls), results, version, lost)


def _run_ops(link: PgConnection, tx: Transaction, calls: Sequence[Call], bare: Sequence[bool] | None,
             results: list[BatchResult]) -> None:
    for i, call in enumerate(calls):
        try:
            value = tx.run_call(call, bare is not None and bare[i])
        except psycopg.Error:
            link.db.failed = True
            return
        except Exception as exc:
            if link.db.failed:
                return
            results.append(BatchResult(None, exc))
        else:
            results.append(BatchResult(value, None))


def _settle(link: PgConnection, cache: VersionedRosterCache, tx: Transaction, n: int, results: list[BatchResult],
            version: Any, lost: psycopg.Error | None) -> list[BatchResult] | None:
    """After the pipeline's last sync: the results, or None to run the batch again op by op."""
    if link.db.failed or link.in_error:
        cache.settle(None)
        tx.depth = 0
        if link.broken:  # nothing was committed: COMMIT was never sent (a read-only batch promised nothing)
            error = link.failure(lost) if lost is not None else errors.StorageUnavailable(
                "the shared store's connection broke; nothing was admitted")
            return [BatchResult(None, error) for _ in range(n)]
        tx.undo(0)
        return None
    row = version.fetchone() if version is not None else None
    stale = cache.settle(int(row[0]) if row is not None else None)
    if stale:
        if tx.depth:
            tx.depth = 0
            tx.undo(0)
        return None
    return results
