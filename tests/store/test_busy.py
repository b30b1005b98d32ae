"""An outside process holding `wardian.db`'s write lock (docs/design/architecture.md, "The store"): the app's writer
waits for it off the event loop, retries the whole batch, and refuses with `storage_unavailable` only once the lock
was held past the writer's bound. A real SQLite file and a real second process; nothing is mocked.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from wardian import errors
from wardian.app.writer import StoreWriter
from wardian.store import Store, StoreBusy, open_sqlite, roster

pytestmark = pytest.mark.fast

# Takes the write lock the way any other SQLite client would, says so, and keeps it until told to let go.
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
conn.close()
"""


@contextmanager
def write_lock_held(db: Path) -> Iterator[subprocess.Popen[str]]:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        yield holder
    finally:
        release(holder)


def release(holder: subprocess.Popen[str]) -> None:
    if holder.poll() is None:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    if holder.stdout is not None:
        holder.stdout.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_sqlite(tmp_path / "wardian.db")
    try:
        yield opened
    finally:
        opened.close()


def names(store: Store) -> list[str]:
    return [a.name for a in roster.list_agents(store)]


def test_a_write_waits_for_an_outside_write_lock_without_stalling_the_loop(store: Store,
                                                                           tmp_path: Path) -> None:
    writer = StoreWriter(store)
    with write_lock_held(tmp_path / "wardian.db") as holder:

        async def main() -> list[Any]:
            outcome: list[Any] = []

            async def add() -> None:
                outcome.append(await writer.call(roster.add_agent, "alice", "codex", None))

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(add)
                    # The loop keeps running other tasks while the lock is held: these turns pass while the write
                    # still waits (the holder lets go only below), instead of after SQLite's busy handler gave up.
                    for _ in range(200):
                        await anyio.lowlevel.checkpoint()
                    assert outcome == [], "the write finished (or failed) while the lock was still held"
                    await anyio.to_thread.run_sync(release, holder)
            return outcome

        added = anyio.run(main)
    assert [a.name for a in added] == ["alice"]
    assert store.run_batch([(names, ())])[0].value == ["alice"]  # applied once


def test_a_write_lock_held_past_the_bound_refuses_with_storage_unavailable(store: Store,
                                                                           tmp_path: Path) -> None:
    writer = StoreWriter(store, busy_deadline_s=0.5)

    async def add() -> Any:
        with anyio.fail_after(60):
            return await writer.call(roster.add_agent, "bob", "codex", None)

    with write_lock_held(tmp_path / "wardian.db"), pytest.raises(errors.StorageUnavailable) as refused:
        anyio.run(add)
    assert refused.value.code == "storage_unavailable"
    assert "another process" in refused.value.message
    assert "nothing was admitted" in refused.value.message
    assert store.run_batch([(names, ())])[0].value == []  # nothing of it stands
    assert anyio.run(add).name == "bob"  # the lock gone, the next write goes through


def test_a_batch_that_meets_busy_half_way_is_rolled_back_and_run_again_whole(store: Store) -> None:
    """SQLite reports BUSY after BEGIN IMMEDIATE only in rare cases (another process recovering the WAL index); the
    fault is raised here by the operation itself, as the engine maps it."""
    attempts: list[int] = []

    def busy_once(s: Store) -> str:
        roster.add_agent(s, "carol", "codex", None)
        attempts.append(1)
        if len(attempts) == 1:
            raise StoreBusy("another process holds the store's write lock: database is locked")
        return "ok"

    # The engine rolls the whole batch back, its neighbour's write too, and says so.
    with pytest.raises(StoreBusy):
        store.begin_batch([(roster.add_agent, ("dave", "codex", None)), (busy_once, ())])
    assert store.run_batch([(names, ())])[0].value == []
    # The writer runs it again whole: applied exactly once.
    writer = StoreWriter(store)

    async def call() -> str:
        with anyio.fail_after(60):
            return await writer.call(busy_once)

    attempts.clear()
    assert anyio.run(call) == "ok"
    assert len(attempts) == 2
    assert store.run_batch([(names, ())])[0].value == ["carol"]
