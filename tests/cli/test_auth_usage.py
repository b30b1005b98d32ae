"""Which agents use each credential when no app runs: the home's SQLite store read-only, or "cannot tell"."""

from __future__ import annotations

from pathlib import Path

import pytest

from wardian.cli.auth_usage import agents_using, usage_of
from wardian.home import Home
from wardian.store import SqliteStore

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_usage_defaults_to_the_default_name() -> None:
    assert usage_of([("b", "codex", None), ("a", "codex", "default"), ("c", "codex", "work")]) == {
        ("codex", "default"): ["a", "b"], ("codex", "work"): ["c"]}


def test_without_an_app_the_store_is_read_read_only(tmp_path: Path) -> None:
    home = Home(tmp_path)
    assert agents_using(home) == {}, "no store yet: no agents"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing created"
    store = SqliteStore.open(home.db_path)
    lead = store.add_agent("lead", "codex", None)
    store.add_agent("oc", "opencode", None)
    store.set_auth(lead.id, "work")
    removed = store.add_agent("gone", "codex", None)
    store.remove_agent(removed.id)
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
