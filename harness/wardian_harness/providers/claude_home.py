"""Point a Claude Code agent at the scripted model, find the Claude Code CLI, and read an agent's transcripts
(docs/providers/claude.md).

The settings are `wardian agent start NAME -c key=value` settings, which the app writes into the agent's private
`settings.json` (a secret-looking `env.*` one goes to the process's environment instead): `env.ANTHROPIC_BASE_URL`
is the agent's scripted-model URL without its `/v1` (Claude Code POSTs to `{base}/v1/messages?beta=true`, which
`ScriptedModel` answers in the Messages dialect), and a dummy `env.ANTHROPIC_API_KEY` (Claude Code refuses to send a
request without a credential).

Discovery: `WARDIAN_CLAUDE` when set (it must exist), else `<repo>/node_modules/.bin/claude` (package.json pins
@anthropic-ai/claude-code), else the first `claude` on PATH.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wardian_harness.providers.cli import REPO_ROOT, CliInstall, CliNotFound, find_cli

__all__ = ["CLAUDE_ENV", "DUMMY_KEY", "ClaudeNotFound", "ScriptedClaude", "claude_overrides",
           "find_claude", "find_transcript", "transcript_binding", "transcript_uuids"]

CLAUDE_ENV = "WARDIAN_CLAUDE"
DUMMY_KEY = "wardian-scripted-model-dummy-key"


class ClaudeNotFound(CliNotFound):
    """No Claude Code executable at the configured path, in node_modules or on PATH."""

    cli = "Claude Code"


def find_claude(env: Mapping[str, str] | None = None, repo_root: Path = REPO_ROOT) -> CliInstall:
    """The Claude Code CLI to use and its version (`providers.cli`'s discovery, by `WARDIAN_CLAUDE`).

    Raises:
        ClaudeNotFound: nothing found, or what was found does not print a version.
    """
    return find_cli("claude", CLAUDE_ENV, ClaudeNotFound, env, repo_root)


@dataclass(frozen=True, slots=True)
class ScriptedClaude:
    """The settings.json settings that point one Claude Code agent at a scripted-model base URL."""

    base_url: str  # AgentScript.base_url: http://127.0.0.1:PORT/agents/<name>/v1
    model: str | None = None


def claude_overrides(scripted: ScriptedClaude) -> list[str]:
    """`-c key=value` settings (TOML values) for `wardian agent start NAME` of a Claude Code agent."""
    base = scripted.base_url.removesuffix("/").removesuffix("/v1")
    config = [f"env.ANTHROPIC_BASE_URL={json.dumps(base)}", f'env.ANTHROPIC_API_KEY="{DUMMY_KEY}"']
    if scripted.model is not None:
        config.append(f"model={json.dumps(scripted.model)}")
    return config


def find_transcript(claude_dir: Path, session_id: str) -> Path | None:
    """A Claude Code agent's transcript of `session_id`: `<claude dir>/config/projects/<cwd key>/<id>.jsonl`."""
    found = sorted((claude_dir / "config" / "projects").glob(f"*/{session_id}.jsonl"))
    return found[0] if found else None


def _entries(text: str) -> list[dict[str, Any]]:
    """A transcript's complete JSON entries (a torn last line, still being written, is skipped)."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            entry: Any = json.loads(line)
        except ValueError:
            continue  # a line being written
        if isinstance(entry, dict):
            out.append(entry)
    return out


def _message_uuids(entry: dict[str, Any]) -> list[str]:
    """The message uuids one entry records: its own `uuid`, and the `source_uuid` of a message folded into a running
    turn (a `queued_command` attachment)."""
    found = [entry["uuid"]] if isinstance(entry.get("uuid"), str) else []
    attachment = entry.get("attachment")
    if isinstance(attachment, dict) and isinstance(attachment.get("source_uuid"), str):
        found.append(attachment["source_uuid"])
    return found


def transcript_uuids(transcript: Path) -> set[str]:
    """Every message uuid a transcript records: its entries' `uuid`s, and the `source_uuid` of a message folded
    into a running turn (a `queued_command` attachment)."""
    return {u for entry in _entries(transcript.read_text(encoding="utf-8")) for u in _message_uuids(entry)}


def transcript_binding(claude_dir: Path, request_id: str, session_id: str | None,
                       message_id: str | None) -> dict[str, Any]:
    """One task's binding (`ask_` -> the Claude Code session and the message uuid the app chose), checked against
    the agent's own transcript: `in_transcript` when that session's transcript records that uuid, `holds_request`
    when the entry under that uuid is of that session and carries the `ask_` id (the delivery's text); with the
    transcript's path and sha256 (hashed from the same bytes that were read)."""
    transcript = find_transcript(claude_dir, session_id) if session_id else None
    binding: dict[str, Any] = {"request_id": request_id, "session_id": session_id, "message_id": message_id,
                               "transcript": None if transcript is None else str(transcript),
                               "transcript_sha256": None, "in_transcript": False, "holds_request": False}
    if transcript is None:
        return binding
    raw = transcript.read_bytes()
    binding["transcript_sha256"] = hashlib.sha256(raw).hexdigest()
    entries = _entries(raw.decode("utf-8", errors="replace"))
    matching = [e for e in entries if message_id is not None and message_id in _message_uuids(e)]
    binding["in_transcript"] = bool(matching)
    binding["holds_request"] = any(e.get("sessionId") == session_id and request_id in json.dumps(e)
                                   for e in matching)
    return binding
