"""The embedded store's roster read without an app, for the commands that need none (`wardian auth status`).

The connection is read-only (`mode=ro`): nothing is written, nothing migrated, and a store of another schema is
an error rather than an upgrade. SQLite may still make the WAL's `-wal` and `-shm` files to read it, as the app
would; it gives them the database file's mode, and the umask is narrowed meanwhile, so they are owner-only.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import NamedTuple

from wardian import errors

__all__ = ["AgentAuth", "read_agent_auth"]


class AgentAuth(NamedTuple):
    name: str
    provider: str
    auth: str | None
    """The credential name its starts use (`ManagedAgent.auth`); None: its provider's default."""


def read_agent_auth(path: Path) -> list[AgentAuth]:
    """Each agent of the store at `path` (not removed) with the credential name its starts use, read-only.

    Raises: StorageUnavailable (missing, unreadable, busy, or not of this schema).
    """
    if not path.is_file():
        raise errors.StorageUnavailable(f"there is no store at {path}", field="store")
    uri = path.resolve().as_uri() + "?mode=ro"
    umask = os.umask(0o077)
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
        try:
            rows: list[tuple[object, object, object]] = conn.execute(
                "SELECT name, provider, auth FROM agents WHERE removed_at IS NULL AND kind = 'agent' ORDER BY id"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise errors.StorageUnavailable(f"the store {path} cannot be read ({type(exc).__name__})",
                                        field="store") from None
    finally:
        os.umask(umask)
    return [AgentAuth(str(name), str(provider), None if auth is None else str(auth)) for name, provider, auth in rows]
