"""What the app hands one Pi agent's runtime (`PiRuntime`) to start it: built by `PiProvider.build_spec` from the
agent's settings and sign-in (docs/guide/pi.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio

from wardian.providers.base import Capabilities

SESSION_FD = "WARDIAN_PI_SESSION_FD"
"""The variable naming the descriptor the extension reads the generation's session from (never the environment)."""


@dataclass(frozen=True, slots=True)
class PiSpec:
    name: str
    argv: list[str]
    """Pi and its arguments before the session's (`--mode rpc -e <extension>`)."""
    workspace: Path
    env: dict[str, str]
    """The process's whole environment: its private home, the quiet variables, `-c env.*` and its sign-in."""
    session: str
    """The generation's wardian session, handed to the extension over a pipe (`SESSION_FD`)."""
    session_file: Path | None
    """The Pi session to resume (`--session`); None: a new one."""
    previous_id: str | None
    """The Pi session the agent had, when its file is gone (a new one replaces it)."""
    allowed: frozenset[str]
    retry: bool
    capabilities: Capabilities
    stderr_path: Path
    pid_path: Path
    mcp_connected: anyio.Event | None = None
