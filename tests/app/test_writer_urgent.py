"""The writer's `urgent` calls (the dispatch claim a delivery waits on): queued while a batch runs, one goes ahead of
the calls queued before it, and each call still learns its result only after its batch's COMMIT."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from wardian.app.writer import StoreWriter
from wardian.home import Home
from wardian.store import Store, open_sqlite

pytestmark = [pytest.mark.anyio, pytest.mark.fast]


async def test_an_urgent_call_runs_before_the_calls_queued_ahead_of_it() -> None:
    root = Path(tempfile.mkdtemp(prefix="wwu", dir="/tmp"))
    store = open_sqlite(Home(root).db_path)
    order: list[str] = []

    def op(name: str) -> Callable[[Store], str]:
        def run(s: Store) -> str:
            order.append(name)
            return name
        return run

    try:
        writer = StoreWriter(store)
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)

            async def queued(name: str, urgent: bool) -> None:
                assert await writer.call(op(name), urgent=urgent) == name

            with anyio.fail_after(30):
                async with anyio.create_task_group() as calls:
                    writer._busy = True  # as while a caller's batch of one runs: what arrives now is queued
                    for name, urgent in (("plain-1", False), ("plain-2", False), ("urgent", True)):
                        calls.start_soon(queued, name, urgent)
                    await anyio.wait_all_tasks_blocked()
                    assert order == []
                    writer._busy = False  # the batch ended; it wakes the writer for what it left queued
                    writer._wakeup.set()
            writer.close()
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    assert order == ["urgent", "plain-1", "plain-2"]
