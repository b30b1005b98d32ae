"""Test hooks of the store: what the tests and the bench need beneath the public operations, kept here so that no
database connection leaves the store package.

Never used by the app. Each hook takes a store the caller opened itself (never the running app's) and returns
plain values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from wardian.model import InteractionKind
from wardian.store._sql import new_public_id, now_ms
from wardian.store.api import Store
from wardian.store.sqlite import SqliteStore, _map_sqlite_errors

T = TypeVar("T")


def execute(store: Store, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement (fault injection, seeding an odd state, reading a setting) and return its rows; on either
    backend (`?` parameters).

    Raises:
        StorageError: the statement failed (mapped as the store maps every database error).
    """
    if isinstance(store, SqliteStore):
        with _map_sqlite_errors():
            return [tuple(row) for row in store._db.execute(sql, parameters).fetchall()]
    from wardian.store.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    with store._errors():
        cur = store._db.execute(sql, parameters)
        return [tuple(row) for row in cur.fetchall()] if cur.description is not None else []


def executemany(store: SqliteStore, sql: str, rows: Iterable[Sequence[Any]]) -> None:
    """Run one statement for each of `rows`, inside one transaction."""
    with store.atomic(), _map_sqlite_errors():
        store._db.executemany(sql, rows)


def set_max_page_count(store: SqliteStore, pages: int) -> int:
    """Cap the database's size in pages, for storage-full faults (reliability-matrix D5); returns the new cap."""
    return int(execute(store, f"PRAGMA max_page_count = {int(pages)}")[0][0])


def seed_information(store: SqliteStore, sender_id: int, recipient_ids: Sequence[int], count: int, text: str, *,
                     start: int = 0) -> None:
    """Append `count` information records from `sender_id`, to `recipient_ids` in turn, in one transaction: a
    large mailbox for the receive benchmark without a million admissions (the rows are what `admit` writes)."""
    executemany(store, "INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, created_at) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                ((new_public_id(InteractionKind.INFORMATION), InteractionKind.INFORMATION.value, sender_id,
                  recipient_ids[(start + i) % len(recipient_ids)], text, now_ms()) for i in range(count)))


def vm_steps(store: SqliteStore, fn: Callable[[], T], every: int = 100) -> tuple[T, int]:
    """Run `fn` and count how much work SQLite did for it: the number of times its virtual machine passed another
    `every` instructions. A query whose count does not grow with the store reads only what it returns (#16)."""
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0  # 0: go on

    store._conn.set_progress_handler(tick, every)
    try:
        return fn(), count
    finally:
        store._conn.set_progress_handler(None, every)
