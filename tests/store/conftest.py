"""The store suites run against both backends (docs/guide/several-machines.md): the embedded SQLite file and a
PostgreSQL database of a private server (`pg_cluster`). Each test gets a fresh store; `Backend` reopens, recreates or
makes another one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from wardian.store import Store, open_sqlite
from wardian_harness.hosts.postgres import PrivateCluster

if TYPE_CHECKING:
    from wardian.store.postgres import PostgresBackend

BACKENDS = ("sqlite", "postgresql")


@dataclass
class Backend:
    """One test's store location on one backend."""

    name: str
    tmp_path: Path
    cluster: PrivateCluster | None = None
    url: str = ""
    opened: list[Store] = field(default_factory=list)

    def open(self) -> Store:
        """The test's store (the same database every time: a reopen)."""
        if self.cluster is None:
            store: Store = open_sqlite(self.tmp_path / "wardian.db")
        else:
            from wardian.store.postgres import open_postgres

            if not self.url:
                self.url = self.cluster.database()
            store = open_postgres(self.url)
        self.opened.append(store)
        return store

    def other(self) -> Store:
        """A different, fresh store (another home, or another database)."""
        if self.cluster is None:
            store: Store = open_sqlite(self.tmp_path / "other.db")
        else:
            from wardian.store.postgres import open_postgres

            store = open_postgres(self.cluster.database())
        self.opened.append(store)
        return store

    def recreate(self) -> None:
        """Remove the test's store, so the next `open` makes a new one (a new epoch). Close it first."""
        if self.cluster is None:
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.tmp_path / "wardian.db") + suffix).unlink(missing_ok=True)
        else:
            name = self.url.split("///", 1)[1].split("?", 1)[0]
            self.cluster.sql(f'DROP DATABASE "{name}" WITH (FORCE)')
            self.cluster.sql(f'CREATE DATABASE "{name}"')

    def close_all(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    cluster = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    b = Backend(request.param, tmp_path, cluster)
    try:
        yield b
    finally:
        b.close_all()


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


def pg(store: Store) -> PostgresBackend:
    """The shared backend under a store a test opened on PostgreSQL (its connection, its wait reader, its URL)."""
    from wardian.store.postgres import PostgresBackend

    backend = store.backend
    assert isinstance(backend, PostgresBackend)
    return backend
