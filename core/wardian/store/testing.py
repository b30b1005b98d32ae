"""Test hooks of the store: what the tests and the bench need beneath the public operations, kept here so that no
database connection leaves the store package.

Never used by the app. Each hook takes a store the caller opened itself (never the running app's) and returns
plain values. Each backend is also its store's backdoor: it implements the protocol below (`Backdoor`; the embedded
one also `SqliteBackdoor`), so these hooks need nothing private of a store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from wardian.model import InteractionKind
from wardian.store._sql import new_public_id, now_ms
from wardian.store.engine import Store

T = TypeVar("T")


@runtime_checkable
class Backdoor(Protocol):
    """Statements of a test's own, on the store's connection, with the store's error mapping."""

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (`?` parameters) and return its rows ([] for a statement that returns none).

        Raises: StorageError (mapped as the store maps every database error)."""
        ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement for each of `rows`, inside the caller's transaction."""
        ...


@runtime_checkable
class SqliteBackdoor(Backdoor, Protocol):
    """The embedded store's: also SQLite's progress handler (how much work its virtual machine did)."""

    def set_progress_handler(self, handler: Callable[[], int] | None, every: int) -> None: ...


def backdoor(store: Store) -> Backdoor:
    """The backdoor of a store this process opened: its backend. Raises: TypeError (a backend without one)."""
    if not isinstance(store.backend, Backdoor):
        raise TypeError(f"{type(store.backend).__name__} offers no test backdoor")
    return store.backend


def execute(store: Store, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement (fault injection, seeding an odd state, reading a setting) and return its rows; on either
    backend (`?` parameters).

    Raises:
        StorageError: the statement failed (mapped as the store maps every database error).
    """
    return backdoor(store).execute(sql, parameters)


def executemany(store: Store, sql: str, rows: Iterable[Sequence[Any]]) -> None:
    """Run one statement for each of `rows`, inside one transaction."""
    with store.atomic():
        backdoor(store).executemany(sql, rows)


def set_max_page_count(store: Store, pages: int) -> int:
    """Cap the database's size in pages, for storage-full faults; returns the new cap (the embedded store only)."""
    return int(execute(store, f"PRAGMA max_page_count = {int(pages)}")[0][0])


def seed_information(store: Store, sender_id: int, recipient_ids: Sequence[int], count: int, text: str, *,
                     start: int = 0) -> None:
    """Append `count` information records from `sender_id`, to `recipient_ids` in turn, in one transaction: a
    large mailbox for the receive benchmark without a million admissions (the rows are what `admit` writes)."""
    executemany(store, "INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, created_at) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                ((new_public_id(InteractionKind.INFORMATION), InteractionKind.INFORMATION.value, sender_id,
                  recipient_ids[(start + i) % len(recipient_ids)], text, now_ms()) for i in range(count)))


def vm_steps(store: Store, fn: Callable[[], T], every: int = 100) -> tuple[T, int]:
    """Run `fn` and count how much work SQLite did for it: the number of times its virtual machine passed another
    `every` instructions. A query whose count does not grow with the store reads only what it returns."""
    door = store.backend
    if not isinstance(door, SqliteBackdoor):
        raise TypeError(f"{type(door).__name__} is not an embedded store's backend")
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0  # 0: go on

    door.set_progress_handler(tick, every)
    try:
        return fn(), count
    finally:
        door.set_progress_handler(None, every)
