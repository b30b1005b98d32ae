"""An agent's git worktree, as the app made it (docs/guide/teams.md#a-worktree-per-agent): the repository, the
branch, what the branch is counted against, and whether wardian made the branch. The agent's workspace column is
the worktree's path; git itself holds everything else (its commits, its changes).

Invariant: a row is written in the transaction that adds its agent, and kept when the agent is removed (as the
agent's row is): a worktree and its branch outlive the agent unless a person removes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wardian.model import now_ms
from wardian.store.engine import Store

_COLS = "agent_id, repo, branch, base, made_branch, created_at"


@dataclass(frozen=True, slots=True)
class Worktree:
    agent_id: int
    repo: str
    """The repository's top folder (of its main work tree)."""
    branch: str
    base: str | None
    """The repository's branch (or commit) when the worktree was made; None when unknown."""
    made_branch: bool
    """wardian made the branch (it did not exist): removing the worktree may delete it when `base` holds it all."""
    created_at: int


def record(store: Store, agent_id: int, repo: str, branch: str, base: str | None, made_branch: bool) -> Worktree:
    """Keep the agent's worktree (inside the caller's transaction that adds the agent)."""
    now = now_ms()
    store.db.write(f"INSERT INTO worktrees ({_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
                   (agent_id, repo, branch, base, int(made_branch), now))
    return Worktree(agent_id, repo, branch, base, made_branch, now)


def of_agent(store: Store, agent_id: int) -> Worktree | None:
    rows = store.db.execute(f"SELECT {_COLS} FROM worktrees WHERE agent_id = ?", (agent_id,)).fetchall()
    return _of(rows[0]) if rows else None


def by_agent(store: Store) -> dict[int, Worktree]:
    """Every agent's worktree, by agent id (removed agents' too)."""
    return {r[0]: _of(r) for r in store.db.execute(f"SELECT {_COLS} FROM worktrees").fetchall()}


def _of(r: Sequence[Any]) -> Worktree:
    return Worktree(agent_id=int(r[0]), repo=r[1], branch=r[2], base=r[3], made_branch=bool(r[4]),
                    created_at=int(r[5]))
