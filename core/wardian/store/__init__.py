"""The interaction store (SQLite, WAL, synchronous=FULL): the app's only persistent state."""

from wardian.store.store import BatchResult, InteractionStore

__all__ = ["BatchResult", "InteractionStore"]
