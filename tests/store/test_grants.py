"""An agent's tool grants are kept with it beside its settings (`set_desired`): a start with grants replaces the
last start's, a stop keeps them, and a store of an older schema (before the grants were kept) reads as none."""

from __future__ import annotations

import sqlite3

import psycopg

from tests.store.conftest import Backend
from tests.store.test_receipts import undo_receipts
from wardian.store import Store, roster


def test_a_start_s_grants_replace_the_last_and_a_stop_keeps_them(store: Store) -> None:
    a = roster.add_agent(store, "a", "codex", None)
    assert roster.managed_agent(store, a.id).approve_tools == ()
    roster.set_desired(store, a.id, "on", "background", ['model="m"'], ["send_message", "reply"])
    assert roster.managed_agent(store, a.id).approve_tools == ("send_message", "reply")
    roster.set_desired(store, a.id, "off")  # a stop: settings and grants stay for the next start
    kept = roster.managed_agent(store, a.id)
    assert (kept.overrides, kept.approve_tools) == (('model="m"',), ("send_message", "reply"))
    roster.set_desired(store, a.id, "on", "background", [], ["followup_task"])
    assert roster.managed_agent(store, a.id).approve_tools == ("followup_task",)
    roster.set_desired(store, a.id, "on", "background", [])  # an explicit start without grants
    assert roster.managed_agent(store, a.id).approve_tools == ()
    assert [m.approve_tools for m in roster.managed_agents(store)] == [()]


def test_an_agent_of_an_older_store_has_no_grants_after_the_migration(backend: Backend) -> None:
    store = backend.open()
    a = roster.add_agent(store, "a", "codex", None)
    roster.set_desired(store, a.id, "on", "background", ['model="m"'])
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
    migrated = roster.managed_agent(again, a.id)
    assert (migrated.desired, migrated.overrides, migrated.approve_tools) == ("on", ('model="m"',), ())
    roster.set_desired(again, a.id, "on", "background", [], ["reply"])
    assert roster.managed_agent(again, a.id).approve_tools == ("reply",)
