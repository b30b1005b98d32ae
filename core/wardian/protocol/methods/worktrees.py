"""An agent's git worktree (docs/guide/teams.md#a-worktree-per-agent): what `agent/add` is given to make one, what
`agent/overview` shows of it, and removing it (`worktree/remove`, `agent/remove` with `remove_worktree`)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, with_config
from typing_extensions import TypedDict

from wardian import errors
from wardian.branches import check_branch
from wardian.protocol.methods.base import CLOSED, AgentField, Params


class WorktreeParams(Params):
    """`agent/add`'s `worktree`: make the agent's workspace a git worktree of `repo` on `branch`, under the home."""

    repo: Annotated[str, Field(min_length=1, max_length=4096)]
    """The repository (any folder of its work tree), an absolute path: the team file's folder, or `--workspace`."""
    branch: str | None = None
    """The worktree's branch (made from the repository's current commit when it does not exist); None:
    `wardian/<agent name>`."""

    @field_validator("branch")
    @classmethod
    def _branch(cls, v: str | None) -> str | None:
        return None if v is None else check_branch(v)

    @field_validator("repo")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not v.startswith("/") and not re.match(r"^[A-Za-z]:[\\/]", v):
            raise errors.InvalidArguments("the repository must be an absolute path", field="worktree.repo",
                                          allowed="an absolute path (the CLI sends one)")
        return v


class WorktreeRemoveParams(Params):
    agent: AgentField


@with_config(CLOSED)
class WorktreeResult(TypedDict):
    path: str
    """The worktree, under the home (`worktrees/<agent name>`); the agent's workspace."""
    repo: str
    branch: str
    base: str | None
    """What the branch is counted against: the repository's branch (or commit) when wardian made the worktree."""
    state: Literal["clean", "dirty", "missing", "unknown"]
    """missing: no worktree at `path` (the agent's next start makes it again from `branch`); unknown: git did not
    answer (`reason` says why)."""
    ahead: int | None
    """Commits on `branch` that `base` lacks; None when unknown."""
    changed: int | None
    """Files changed, added or untracked in the worktree; None when unknown."""
    reason: str | None


@with_config(CLOSED)
class WorktreeRemovalResult(TypedDict):
    path: str
    branch: str
    removed: bool
    """The worktree folder was removed (it was clean) or was already gone."""
    branch_deleted: bool
    """The branch was deleted: wardian made it and `base` holds all its commits. Otherwise it is kept."""
    note: str | None
    """Why the branch (or the worktree) was kept, when it was."""
