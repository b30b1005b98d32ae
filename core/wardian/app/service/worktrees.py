"""Agents' git worktrees (docs/guide/teams.md#a-worktree-per-agent): made when an agent is added with one, made
again at a start that finds it gone, shown in `agent/overview`, removed only when asked and clean (`worktree/remove`,
`agent/remove` with `remove_worktree`). The store keeps which agent has one; git keeps the rest."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from wardian import errors
from wardian.app import worktree as git
from wardian.app.service.registry import handlers
from wardian.branches import default_branch
from wardian.model import Agent, AgentOverview, AgentStatus
from wardian.protocol.methods import (
    WorktreeParams,
    WorktreeRemovalResult,
    WorktreeRemoveParams,
    WorktreeRemoveResult,
    WorktreeResult,
    agent_result,
)
from wardian.store import Store, roster, worktrees
from wardian.store.worktrees import Worktree

if TYPE_CHECKING:
    from wardian.app.service.app import AppService

log = logging.getLogger("wardian.app")
RUNNING = frozenset({AgentStatus.STARTING, AgentStatus.IDLE, AgentStatus.ACTIVE})
STATE_READS = 4
"""At most this many worktrees are read at once for an overview (each git call is bounded by `git.READ_TIMEOUT_S`)."""


async def make(app: AppService, name: str, params: WorktreeParams) -> tuple[Path, str, git.Made]:
    """The worktree of a new agent `name`: its path, branch and what git did. Refused, with nothing created, when
    another agent of the home works at that path.

    Raises: WorktreePathTaken; and what `git.ensure` raises.
    """
    path = app.home.worktree_path(name)
    branch = params.branch or default_branch(name)
    users = [a for a in await app.writer.call(roster.list_agents) if a.workspace and Path(a.workspace) == path]
    if users:
        raise errors.WorktreePathTaken(f"{path} is the workspace of agent {users[0].name} ({users[0].uuid}); remove "
                                       "it first, or give the new agent another name", field="worktree",
                                       path=str(path))
    made = await anyio.to_thread.run_sync(git.ensure, Path(params.repo), branch, path)
    log.info("worktree %s of agent %s: %s on %s", path, name, "reused" if made.reused else "made", branch)
    return path, branch, made


async def states(rows: Sequence[AgentOverview], mine: str | None,
                 records: dict[int, Worktree]) -> dict[int, WorktreeResult]:
    """Each local agent's worktree as `agent/overview` shows it, read side by side (another host's agent: its path
    is on that host, so git is not asked)."""
    found: dict[int, WorktreeResult] = {}
    limiter = anyio.CapacityLimiter(STATE_READS)

    async def one(agent: Agent, record: Worktree) -> None:
        path = Path(agent.workspace or "")
        if agent.host not in (None, mine):
            now = git.State("unknown", reason=f"on host {agent.host}")
        else:
            now = await anyio.to_thread.run_sync(git.state, path, record.base, limiter=limiter)
        found[agent.id] = {"path": str(path), "repo": record.repo, "branch": record.branch, "base": record.base,
                           "state": now.state, "ahead": now.ahead,
                           "changed": None if now.state in ("missing", "unknown") else len(now.changed),
                           "reason": now.reason}

    async with anyio.create_task_group() as tg:
        for row in rows:
            if (record := records.get(row.agent.id)) is not None:
                tg.start_soon(one, row.agent, record)
    return found


async def remove_worktree(app: AppService, agent: Agent, record: Worktree) -> WorktreeRemovalResult:
    """Remove the agent's clean worktree, and its branch when wardian made it and the base holds it all.

    Raises: WorktreeDirty (nothing removed); GitNotFound; GitFailed.
    """
    path = Path(agent.workspace or app.home.worktree_path(agent.name))
    done = await anyio.to_thread.run_sync(git.remove, path, record.repo, record.branch, record.base,
                                          record.made_branch)
    log.info("worktree %s of agent %s removed (branch %s %s)", path, agent.name, record.branch,
             "deleted" if done.branch_deleted else "kept")
    return {"path": str(path), "branch": record.branch, "removed": done.removed,
            "branch_deleted": done.branch_deleted, "note": done.note}


def _worktree_of(store: Store, name_or_uuid: str) -> tuple[Agent, Worktree]:
    agent = roster.resolve_agent(store, name_or_uuid)
    record = worktrees.of_agent(store, agent.id)
    if record is None:
        raise errors.InvalidArguments(f"agent {agent.name} has no worktree", field="remove_worktree",
                                      allowed="an agent added with a worktree")
    return agent, record


async def worktree_for_removal(app: AppService, name_or_uuid: str) -> tuple[Agent, Worktree]:
    """The agent and its worktree, once the worktree was found clean (so a refusal leaves everything as it was).

    Raises: UnknownAgent; InvalidArguments (no worktree); WorktreeDirty; GitNotFound; GitFailed.
    """
    agent, record = await app.writer.call(_worktree_of, name_or_uuid)
    await anyio.to_thread.run_sync(git.check_clean, Path(agent.workspace or ""))
    return agent, record


@handlers.serves("worktree/remove")
async def remove(app: AppService, p: WorktreeRemoveParams) -> WorktreeRemoveResult:
    agent, record = await worktree_for_removal(app, p.agent)
    if agent.status in RUNNING:
        raise errors.InvalidArguments(f"agent {agent.name} is running in its worktree: stop it first "
                                      f"(`wardian agent stop {agent.name}`)", field="agent",
                                      allowed="a stopped agent")
    return {"agent": agent_result(agent), "worktree": await remove_worktree(app, agent, record)}
