"""Which agents use each credential, for `wardian auth status`: from the running app when one serves the home,
else from the home's embedded store opened read-only (the CLI signs in without an app, as `gh auth` does).

An agent uses the credential of its provider named by its `auth`, else its provider's `default` one.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable

from wardian import errors
from wardian.auth.model import DEFAULT_NAME
from wardian.home import Home

Usage = dict[tuple[str, str], list[str]]
"""(provider, credential name) -> the names of the agents that use it."""


def usage_of(agents: Iterable[tuple[str, str, str | None]]) -> Usage:
    """From (agent name, provider, auth) rows."""
    used: Usage = {}
    for name, provider, auth in agents:
        used.setdefault((provider, auth or DEFAULT_NAME), []).append(name)
    return {k: sorted(v) for k, v in used.items()}


def agents_using(home: Home) -> Usage | None:
    """Which agents use each credential; None when the roster cannot be read here (no app runs, and the home keeps
    its agents in a shared PostgreSQL store, or its store cannot be opened)."""
    from wardian.client import AppClient

    try:
        with AppClient(home, connect_timeout_s=2.0) as app:
            listed = app.call("agent/list", {})
    except errors.TransportError:
        return _from_embedded_store(home)
    managed = listed.get("managed", {})
    return usage_of((a["name"], a["provider"], managed.get(a["uuid"], {}).get("auth"))
                    for a in listed["agents"])


def _from_embedded_store(home: Home) -> Usage | None:
    """The roster of the home's SQLite store, read-only (`mode=ro`: nothing is written or migrated). SQLite may
    still create the WAL's `-wal` and `-shm` files to read it, as the app would: owner-only, as the app's are."""
    if home.store_url_path.exists():
        return None  # a shared store: only an app reaches it (with its own credentials)
    if not home.db_path.exists():
        return {}
    uri = home.db_path.resolve().as_uri() + "?mode=ro"
    umask = os.umask(0o077)
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
        try:
            rows = conn.execute("SELECT name, provider, auth FROM agents "
                                "WHERE removed_at IS NULL AND kind = 'agent' ORDER BY id").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None  # an older store without `auth`, or one another process holds: status says it cannot tell
    finally:
        os.umask(umask)
    return usage_of((str(r[0]), str(r[1]), None if r[2] is None else str(r[2])) for r in rows)
