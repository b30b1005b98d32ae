"""What the Claude Code provider's `prepare` decides for one start, and the runtime runs (`ClaudeRuntime(spec)`).

`prepare` (the private directories, `settings.json`, the MCP registration, the credential's descriptor) and
the runtime (the process, its stream-json wire, deliveries and outcomes) meet only here, so either can be read,
and tested, without the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wardian.providers.base import Capabilities


@dataclass(frozen=True, slots=True)
class FdCredential:
    """The agent's sign-in as Claude Code reads it from a file descriptor: `variable` names the descriptor's number,
    and the runtime hands `secret` over in a pipe at each process start (`process.secret_pipe`)."""

    variable: str
    secret: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ClaudeSpec:
    name: str
    """The agent's name (logs only)."""
    executable: str
    """The Claude Code CLI (`WARDIAN_CLAUDE`, else the pinned npm one, else PATH)."""
    workspace: Path
    """The process's working directory; Claude keys its transcripts by it."""
    env: dict[str, str]
    """The process's whole environment: the private directories (`CLAUDE_CONFIG_DIR`, `TMPDIR`, `XDG_RUNTIME_DIR`,
    `XDG_CACHE_HOME`; `HOME` stays the person's, for the agent's tools), the quiet variables and the agent's settings'
    secrets; never its sign-in (`credential`)."""
    config_dir: Path
    """`CLAUDE_CONFIG_DIR`: `settings.json`, the transcripts under `projects/`, the live registry under `sessions/`."""
    mcp_config: Path
    """The 0600 `--mcp-config` file registering `wardian mcp serve` as server `wardian` (with `--strict-mcp-config`)."""
    allowed_tools: tuple[str, ...]
    """`--allowedTools` entries (`mcp__wardian__list_agents`, ...): the tools that run without asking."""
    session_id: str | None
    """The agent's conversation to resume (`--resume=<id>`); None: the runtime chooses a new id (`--session-id`)."""
    capabilities: Capabilities
    stderr_path: Path
    pid_path: Path
    credential: FdCredential | None = None
    """The agent's sign-in, handed over on a file descriptor, never in the environment (None: none)."""
    permission_prompt: bool = False
    """Start with `--permission-prompt-tool stdio`: a tool call no rule allows is asked of wardian, which hands it to
    the app as an approval (`approvals`), instead of being refused by Claude Code itself."""
