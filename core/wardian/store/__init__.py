"""The interaction store: the app's only persistent state, behind one seam (`Store`); SQLite is the embedded backend."""

from wardian.store.api import BatchResult, Store
from wardian.store.sqlite import SqliteStore

__all__ = ["BatchResult", "SqliteStore", "Store"]
