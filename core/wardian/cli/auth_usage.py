"""Which agents use each credential, for `wardian auth status`: from the running app when one serves the home,
else from the home's embedded store opened read-only (the CLI signs in without an app, as `gh auth` does).

An agent uses the credential of its provider named by its `auth`, else its provider's `default` one.
"""

from __future__ import annotations

from collections.abc import Iterable

from wardian import errors
from wardian.auth.model import DEFAULT_NAME
from wardian.client import AppClient
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
    try:
        with AppClient(home, connect_timeout_s=2.0) as app:
            listed = app.call("agent/list", {})
    except (errors.AppNotRunning, errors.AppIncompatible):
        return _from_embedded_store(home)  # no app of this wardian answers: the store, read-only
    # UntrustedSocket is raised: a home whose socket is not this user's is not read at all.
    managed = listed.get("managed", {})
    return usage_of((a["name"], a["provider"], managed.get(a["uuid"], {}).get("auth"))
                    for a in listed["agents"])


def _from_embedded_store(home: Home) -> Usage | None:
    """The roster of the home's SQLite store, read-only; None when it cannot be read."""
    # The store package is ten times the client's imports: loaded only when no app answers.
    from wardian.store.sqlite.readonly import read_agent_auth

    if home.store_url_path.exists():
        return None  # a shared store: only an app reaches it (with its own credentials)
    if not home.db_path.exists():
        return {}
    try:
        return usage_of(read_agent_auth(home.db_path))
    except errors.StorageUnavailable:
        return None  # an older store without `auth`, or one being replaced: status says it cannot tell
