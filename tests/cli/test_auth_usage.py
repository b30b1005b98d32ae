"""Which agents use each credential when no app runs: the home's SQLite store read-only, or "cannot tell"."""

from __future__ import annotations

from pathlib import Path

import pytest

from wardian.cli.auth_usage import agents_using, usage_of
from wardian.home import Home
from wardian.store import open_sqlite, roster

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_usage_defaults_to_the_default_name() -> None:
    assert usage_of([("b", "codex", None), ("a", "codex", "default"), ("c", "codex", "work")]) == {
        ("codex", "default"): ["a", "b"], ("codex", "work"): ["c"]}


def test_without_an_app_the_store_is_read_read_only(tmp_path: Path) -> None:
    home = Home(tmp_path)
    assert agents_using(home) == {}, "no store yet: no agents"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing created"
    store = open_sqlite(home.db_path)
    lead = roster.add_agent(store, "lead", "codex", None)
    roster.add_agent(store, "oc", "opencode", None)
    roster.set_auth(store, lead.id, "work")
    removed = roster.add_agent(store, "gone", "codex", None)
    roster.remove_agent(store, removed.id)
    store.close()
    home.db_path.chmod(0o600)  # as the app keeps it (wardian.home_setup.prepare_home)
    before = home.db_path.read_bytes()
    assert agents_using(home) == {("codex", "work"): ["lead"], ("opencode", "default"): ["oc"]}
    assert home.db_path.read_bytes() == before
    for p in tmp_path.iterdir():
        if p.name != "wardian.db":  # the -wal and -shm SQLite may make to read it
            assert p.stat().st_mode & 0o077 == 0, f"{p.name} is open to others"
    home.store_url_path.write_text("postgresql://db.example/wardian\n")
    assert agents_using(home) is None, "a shared store is reached only through an app"
