"""The permission requests the app answered for an agent that nobody may answer (docs/guide/acp.md#permissions):
one row each, with the agent, the task whose turn asked (`ask_…`, when there was one), the tool and the agent's
title for the call, the options it offered and the answer given. A person sees them in `wardian message log`, the
console's agents page and `wardian status`.

Invariant: a row is written once and never changed; the answer it records was already given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from wardian.model import Party, PermissionOption, PermissionRequest, PermissionTally, now_ms
from wardian.store._sql import party_of_id
from wardian.store.engine import Store

MAX_TEXT = 2000
"""A tool name or title longer than this is cut (it is the agent's text, shown to a person, not a payload)."""
_COLS = "id, agent_id, request_id, turn_id, tool, title, options, answer, created_at"


def record(store: Store, agent_id: int, request_id: str | None, turn_id: str | None, tool: str, title: str,
           options: Sequence[PermissionOption], answer: str) -> int:
    """Keep one answered request; returns its id."""
    with store.atomic():
        return int(store.db.write(
            f"INSERT INTO permission_requests ({_COLS.removeprefix('id, ')}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            (agent_id, request_id, turn_id, tool[:MAX_TEXT], title[:MAX_TEXT],
             json.dumps([list(o) for o in options]), answer, now_ms())).fetchone()[0])


def recent(store: Store, limit: int) -> list[PermissionRequest]:
    """The newest `limit` requests, oldest first."""
    rows = store.db.execute(f"SELECT {_COLS} FROM permission_requests ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
    cache: dict[int, Party] = {}
    return [_of(store, r, cache) for r in reversed(rows)]


def tallies(store: Store) -> dict[int, PermissionTally]:
    """Each agent's count of requests and its newest one, by agent id."""
    counts = dict(store.db.execute("SELECT agent_id, count(*) FROM permission_requests GROUP BY agent_id").fetchall())
    if not counts:
        return {}
    rows = store.db.execute(
        f"SELECT {_COLS} FROM permission_requests WHERE id IN "
        "(SELECT max(id) FROM permission_requests GROUP BY agent_id)").fetchall()
    cache: dict[int, Party] = {}
    return {r[1]: PermissionTally(int(counts[r[1]]), _of(store, r, cache)) for r in rows}


def _of(store: Store, r: Sequence[Any], cache: dict[int, Party]) -> PermissionRequest:
    options = tuple(PermissionOption(*map(str, o)) for o in json.loads(r[6]))
    return PermissionRequest(id=r[0], agent=party_of_id(store.db, r[1], cache), request_id=r[2], turn_id=r[3],
                             tool=r[4], title=r[5], options=options, answer=r[7], created_at=r[8])
