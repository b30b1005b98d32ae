"""A generic ACP agent's command line is kept with the agent from `agent add` on (`roster.add_agent`), and an agent
of an older store (before it was kept) reads as having none (migration 14 of the embedded store, 8 of the shared
one)."""

from __future__ import annotations

import sqlite3

import psycopg

from tests.store.conftest import Backend
from tests.store.test_receipts import undo_command
from wardian.store import Store, roster


def test_an_acp_agent_keeps_its_command_line_and_the_others_have_none(store: Store) -> None:
    acp = roster.add_agent(store, "a", "acp", None, ["opencode", "acp", "--log-level", "WARN"])
    codex = roster.add_agent(store, "b", "codex", None)
    roster.set_desired(store, acp.id, "on", "background", [], [], ["X=1"])
    assert roster.managed_agent(store, acp.id).command == ("opencode", "acp", "--log-level", "WARN")
    assert roster.managed_agent(store, codex.id).command == ()


def test_an_agent_of_an_older_store_has_no_command_after_the_migration(backend: Backend) -> None:
    store = backend.open()
    a = roster.add_agent(store, "a", "codex", None)
    roster.set_desired(store, a.id, "on", "background", ['model="m"'], ["reply"], ["X=1"])
    backend.close_all()
    if backend.cluster is None:
        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_command(db)
            db.execute("PRAGMA user_version = 13")
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_command(db)
            db.execute("DELETE FROM wardian_schema WHERE version >= 8")
    migrated = roster.managed_agent(backend.open(), a.id)
    assert (migrated.env, migrated.command) == (("X=1",), ())
