"""What a team file (`wardian.toml`) says, once every part of it was checked: the team, its agents, and the problems
of a file that is not valid (docs/guide/team-file.md, docs/reference/team-file.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.taskpolicy import TaskPolicy

DEFAULT_FILE = "wardian.toml"
DEFAULT_POLICY = TaskPolicy()


@dataclass(frozen=True, slots=True)
class TeamAgent:
    """One `[agents.NAME]` table: what `wardian agent add` and `wardian agent start` get for it."""

    name: str
    """The `[agents.NAME]` key: a name `wardian agent add NAME` takes."""
    provider: str
    """codex, opencode, claude, qwen, gemini, pi or acp."""
    workspace: Path | None
    """Absolute (relative paths are read from the team file's directory); an existing directory."""
    mode: str | None
    """background or attached (what `agent start --mode` takes); None: the provider's default."""
    approve_tools: tuple[str, ...]
    """The wardian tools granted (`agent start --approve-tools`), each once, sorted."""
    auth: str | None
    """A credential name (`wardian auth login --name`); checked as a name, not looked up."""
    settings: tuple[str, ...]
    """The `-c KEY=VALUE` strings `agent start` gets: `[defaults.<provider>]` deep-merged under the agent's
    `settings`, flattened to dotted keys (arrays and inline tables are single values), VALUE as TOML, sorted by key."""
    env: tuple[str, ...] = ()
    """The `--env NAME=VALUE` strings `agent start` gets, sorted by name."""
    command: tuple[str, ...] = ()
    """A generic ACP agent's command line (`command = ["opencode", "acp"]`), as `agent add --command` takes it."""
    line: int = 0
    """The 1-based line of the agent's `[agents.NAME]` header (or of the key that first names it)."""
    worktree: str | None = None
    """The branch of the agent's git worktree (`worktree = true`: `wardian/NAME`); None: no worktree. With one,
    `workspace` is the repository (default: the team file's folder) and the agent works in the worktree."""
    approvals: str | None = None
    """Who answers its permission requests (`approvals = "person"`); None: not given (deny, as `agent start`)."""
    approval_timeout_ms: int | None = None
    """How long an approval waits for its answer (`approval_timeout = "10m"`); None: not given (10 minutes)."""
    allow: tuple[str, ...] = ()
    """Its allow rules (`allow = ["Bash(git status:*)"]`, `agent start --allow`), checked, in the file's order."""


@dataclass(frozen=True, slots=True)
class Team:
    """A valid team file."""

    path: Path
    """The team file, absolute."""
    home: Path
    """`[team].home` (relative to the file's directory); else `$WARDIAN_HOME`; else `.wardian` beside the file."""
    console: str | None
    """`[team].console`: the loopback address `wardian app run --console` takes; None: no web console."""
    agents: tuple[TeamAgent, ...]
    """In the order of the file."""
    policy: TaskPolicy = DEFAULT_POLICY
    """`[team].task_deadline`, `max_task_depth` and `max_chain_tasks`: what `wardian up` sets (`team/policy`)."""
    notify: tuple[str, ...] | None = None
    """`[team].notify`: the command `wardian app run --notify-command` runs; None: no notifications."""


@dataclass(frozen=True, slots=True)
class TeamProblem:
    """One thing wrong with a team file: where, which field, and what is allowed instead."""

    path: Path
    line: int
    """1-based; 0 when the file could not be read at all."""
    field: str
    """The dotted path of the field (`agents.lead.settings.model`); `file` or `toml` for the file as a whole."""
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.field}: {self.message}"

    def to_data(self) -> dict[str, Any]:
        return {"path": str(self.path), "line": self.line, "field": self.field, "message": self.message}


class TeamFileError(errors.InvalidTeamFile):
    """The team file is not valid: every problem found in it, in the order of the file; nothing was started or
    changed. Built by `of`; the constructor is the error tree's own (an error rebuilt from its wire form)."""

    def __init__(self, message: str, *, problems: tuple[TeamProblem, ...] = (), field: str | None = None,
                 allowed: str | None = None, **details: Any) -> None:
        if problems:
            details["problems"] = [p.to_data() for p in problems]
        super().__init__(message, field=field, allowed=allowed, **details)
        self.problems = problems

    @classmethod
    def of(cls, path: Path, problems: tuple[TeamProblem, ...]) -> TeamFileError:
        count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
        lines = "\n".join(f"  {p}" for p in problems)
        return cls(f"the team file {path} is not valid ({count}); nothing was started or changed:\n{lines}",
                   problems=problems, field="team_file")
