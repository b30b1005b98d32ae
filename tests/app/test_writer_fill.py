"""The writer on a store behind a network round trip (PostgreSQL): once several callers were active around a batch,
the first caller back does not run alone while the others gather behind it; a lone caller, and an urgent call, still
run at once in their own task (the module docstring of `wardian.app.writer`)."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from wardian import errors
from wardian.app.writer import StoreWriter
from wardian.store import Store, roster
from wardian.store.postgres import open_postgres
from wardian_harness.hosts.postgres import PrivateCluster

pytestmark = [pytest.mark.anyio]


@pytest.fixture
def pg_store(pg_cluster: PrivateCluster) -> Iterator[Store]:
    store = open_postgres(pg_cluster.database())
    try:
        yield store
    finally:
        store.close()


def _read(s: Store) -> int:
    return len(roster.list_agents(s))  # a read: one statement on the server


async def _round(writer: StoreWriter, callers: int, *, urgent: bool = False) -> int:
    """`callers` calls begun in one tick of the loop; the writer's transactions they took."""
    before = writer.batches
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for _ in range(callers):
                tg.start_soon(lambda: writer.call(_read, urgent=urgent))
    return writer.batches - before


async def test_a_round_of_callers_after_a_batch_of_many_is_one_transaction(pg_store: Store) -> None:
    writer = StoreWriter(pg_store)
    async with anyio.create_task_group() as tg:
        await tg.start(writer.run)
        # From idle: the first caller runs alone in its own task, the other seven gather behind it.
        assert await _round(writer, 8) == 2
        # Eight were active: the next round's first caller waits for the others rather than running alone.
        assert await _round(writer, 7) == 1
        assert await _round(writer, 7) == 1
        # Alone after many: it waits at most FILL_WAIT_S for the others, then goes by itself.
        assert await _round(writer, 1) == 1
        # Alone after alone: it runs at once, and so does an urgent call whatever came before.
        assert await _round(writer, 1) == 1
        assert await _round(writer, 6) == 2
        assert await _round(writer, 1, urgent=True) == 1
        writer.close()


async def test_a_closing_writer_does_not_wait_for_callers_that_will_not_come(pg_store: Store) -> None:
    writer = StoreWriter(pg_store)
    async with anyio.create_task_group() as tg:
        await tg.start(writer.run)
        assert await _round(writer, 8) == 2
        writer.close()  # what is already submitted still runs; nothing waits for more
    with pytest.raises(errors.StorageUnavailable, match="shutting down"):
        await writer.call(_read)
