"""The interaction store: the app's only persistent state, behind one seam (`Store`).

SQLite is the embedded backend (`wardian.store.sqlite`), PostgreSQL the shared one (`wardian.store.postgres`, which
imports its driver only when a shared store is opened).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from wardian.store.api import BatchResult, Store, StoreBusy
from wardian.store.sqlite import SqliteStore

__all__ = ["BatchResult", "SqliteStore", "Store", "StoreBusy", "StoreHome", "open_store"]


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
        from wardian.store.postgres import PostgresStore  # psycopg is imported only for a shared store

        return PostgresStore.open(url_or_home)
    return SqliteStore.open(url_or_home.db_path)
