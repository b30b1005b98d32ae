"""The interaction store: the app's only persistent state, one `Store` over a backend (`wardian.store.api.Backend`).

SQLite is the embedded backend (`wardian.store.sqlite`), PostgreSQL the shared one (`wardian.store.postgres`, which
imports its driver only when a shared store is opened). The store's operations are functions of a `Store` in its parts
(`roster`, `mailbox`, `history`, `ledger`, `hosts`, `lost`), which the app runs through its writer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from wardian.store.api import BatchResult, StoreBusy
from wardian.store.engine import Store
from wardian.store.sqlite import open_sqlite

__all__ = ["BatchResult", "Store", "StoreBusy", "StoreHome", "open_sqlite", "open_store"]


class StoreHome(Protocol):
    """A home, as far as the store is concerned: where its embedded store's file is."""

    @property
    def db_path(self) -> Path: ...


def open_store(url_or_home: str | StoreHome) -> Store:
    """Open the store a home serves: the shared store at a PostgreSQL URL, or a home's own SQLite file.

    Raises:
        InvalidArguments: a URL that is refused (not PostgreSQL, or carrying a password).
        StorageUnavailable, StorageFull, StoreCorrupt: the store cannot be opened or migrated.
    """
    if isinstance(url_or_home, str):
        from wardian.store.postgres import open_postgres  # psycopg is imported only for a shared store

        return open_postgres(url_or_home)
    return open_sqlite(url_or_home.db_path)
