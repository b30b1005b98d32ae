"""Starting one agent's Claude Code: its command line, the uuids wardian chooses, and what the `initialize` answer
says of the agent's credentials (docs/providers/claude.md)."""

from __future__ import annotations

import uuid as uuids
from typing import Any

from wardian import errors
from wardian.providers.claude.approvals import PROMPT_TOOL_ARGS
from wardian.providers.claude.spec import ClaudeSpec


def command(spec: ClaudeSpec, session_id: str, *, resume: bool) -> list[str]:
    argv = [spec.executable, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
            "--mcp-config", str(spec.mcp_config), "--strict-mcp-config"]
    if spec.allowed_tools:
        argv += ["--allowedTools", ",".join(spec.allowed_tools)]
    if spec.permission_prompt:
        argv += PROMPT_TOOL_ARGS
    return [*argv, f"--resume={session_id}" if resume else f"--session-id={session_id}"]


def new_uuid() -> str:
    return str(uuids.uuid4())


def check_signed_in(name: str, account: Any) -> None:
    """Raises NotSignedIn when Claude Code found no credential at all: no API key, token or helper (from the
    environment or its settings) and no sign-in of its own (docs/providers/claude.md)."""
    if not isinstance(account, dict):
        return
    provider = account.get("apiProvider")
    sources = [account.get("apiKeySource"), account.get("tokenSource")]
    if provider not in (None, "firstParty") or any(s not in (None, "none") for s in sources):
        return
    if any(account.get(k) for k in ("subscriptionType", "email", "organization")):
        return
    raise errors.NotSignedIn(f"Claude Code agent {name} is not signed in: run "
                             "`wardian auth login claude --with-api-key`", field="agent")
