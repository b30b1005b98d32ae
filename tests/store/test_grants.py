"""An agent's tool grants are kept with it beside its settings (`set_desired`): a start with grants replaces the
last start's, a stop keeps them, and a store of an older schema (before the grants were kept) reads as none."""

from __future__ import annotations

import sqlite3

import psycopg

from tests.store.conftest import Backend
from tests.store.test_receipts import undo_receipts
from wardian.store import Store


def test_a_start_s_grants_replace_the_last_and_a_stop_keeps_them(store: Store) -> None:
    a = store.add_agent("a", "codex", None)
    assert store.managed_agent(a.id).approve_tools == ()
    store.set_desired(a.id, "on", "background", ['model="m"'], ["send_message", "reply"])
    assert store.managed_agent(a.id).approve_tools == ("send_message", "reply")
    store.set_desired(a.id, "off")  # a stop: settings and grants stay for the next start
    kept = store.managed_agent(a.id)
    assert (kept.overrides, kept.approve_tools) == (('model="m"',), ("send_message", "reply"))
    store.set_desired(a.id, "on", "background", [], ["followup_task"])
    assert store.managed_agent(a.id).approve_tools == ("followup_task",)
    store.set_desired(a.id, "on", "background", [])  # an explicit start without grants
    assert store.managed_agent(a.id).approve_tools == ()
    assert [m.approve_tools for m in store.managed_agents()] == [()]


def test_an_agent_of_an_older_store_has_no_grants_after_the_migration(backend: Backend) -> None:
    store = backend.open()
    a = store.add_agent("a", "codex", None)
    store.set_desired(a.id, "on", "background", ['model="m"'])
    backend.close_all()
    # Undo the migration that added the column, and the later ones: the store as the previous wardian left it.
    if backend.cluster is None:
        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_receipts(db, postgresql=backend.cluster is not None)
            db.execute("ALTER TABLE agents DROP COLUMN approve_tools")
            db.execute("PRAGMA user_version = 10")
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_receipts(db, postgresql=backend.cluster is not None)
            db.execute("ALTER TABLE agents DROP COLUMN approve_tools")
            db.execute("DELETE FROM wardian_schema WHERE version >= 5")
    again = backend.open()
    migrated = again.managed_agent(a.id)
    assert (migrated.desired, migrated.overrides, migrated.approve_tools) == ("on", ('model="m"',), ())
    again.set_desired(a.id, "on", "background", [], ["reply"])
    assert again.managed_agent(a.id).approve_tools == ("reply",)
