"""An agent's `--env` settings are kept with it beside its `-c` settings (`set_desired`): a start replaces the last
start's, a stop keeps them, and a store of an older schema (before they were kept) reads as none (migration 13 of the
embedded store, 7 of the shared one)."""

from __future__ import annotations

import sqlite3

import psycopg

from tests.store.conftest import Backend
from tests.store.test_receipts import undo_env
from wardian.store import Store, roster


def test_a_start_s_env_replaces_the_last_and_a_stop_keeps_it(store: Store) -> None:
    a = roster.add_agent(store, "a", "qwen", None)
    assert roster.managed_agent(store, a.id).env == ()
    roster.set_desired(store, a.id, "on", "background", [], [], ["OPENAI_MODEL=m", "OPENAI_BASE_URL=http://x/v1"])
    roster.set_desired(store, a.id, "off")
    assert roster.managed_agent(store, a.id).env == ("OPENAI_MODEL=m", "OPENAI_BASE_URL=http://x/v1")
    roster.set_desired(store, a.id, "on", "background", [])
    assert roster.managed_agent(store, a.id).env == ()


def test_an_agent_of_an_older_store_has_no_env_after_the_migration(backend: Backend) -> None:
    store = backend.open()
    a = roster.add_agent(store, "a", "codex", None)
    roster.set_desired(store, a.id, "on", "background", ['model="m"'], ["reply"])
    backend.close_all()
    if backend.cluster is None:
        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_env(db)
            db.execute("PRAGMA user_version = 12")
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_env(db)
            db.execute("DELETE FROM wardian_schema WHERE version >= 7")
    migrated = roster.managed_agent(backend.open(), a.id)
    assert (migrated.overrides, migrated.approve_tools, migrated.env) == (('model="m"',), ("reply",), ())
