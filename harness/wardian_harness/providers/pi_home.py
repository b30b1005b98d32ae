"""Point a Pi agent at the scripted model, and find the Pi CLI (docs/guide/pi.md).

Pi takes a model provider of its own from the agent's `models.json` (`-c models.…` settings): here an
`openai-completions` provider at the agent's scripted-model URL (the Chat dialect) with a dummy key (a real one comes
from `wardian auth login pi`), chosen as the default in its `settings.json`.

A task's binding is checked against Pi's own session file (`session_binding`): Pi keeps each session in
`<agent>/pi/sessions/<ISO time>_<session id>.jsonl`, one entry per line
(https://github.com/badlogic/pi-mono/blob/main/packages/coding-agent/docs/sessions.md), and a task's prompt is a user
message whose text carries its `request_id`.

Discovery (`providers.cli`): `WARDIAN_PI` when set, else `<repo>/node_modules/.bin/pi` (package.json pins it), else
the first one on PATH.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wardian_harness.providers.cli import REPO_ROOT, CliInstall, CliNotFound, find_cli

__all__ = ["MODEL", "PiNotFound", "find_pi", "pi_settings", "session_binding"]

MODEL = "scripted-model"


class PiNotFound(CliNotFound):
    """No Pi executable at `WARDIAN_PI`, in node_modules or on PATH."""

    cli = "Pi"


def find_pi(env: Mapping[str, str] | None = None, repo_root: Path = REPO_ROOT) -> CliInstall:
    """The `pi` CLI to use and its version. Raises: PiNotFound."""
    return find_cli("pi", "WARDIAN_PI", PiNotFound, env, repo_root)


def pi_settings(base_url: str, *, retry: bool = False) -> list[str]:
    """The `-c` settings pointing a Pi agent at its scripted-model URL (`AgentScript.base_url`); with `retry`, Pi's
    auto-retry back on (wardian turns it off)."""
    provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": "scripted-dummy",
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": MODEL}]}
    config = [f"models.providers.scripted={json.dumps(provider)}", 'defaultProvider="scripted"',
              f"defaultModel={json.dumps(MODEL)}"]
    return [*config, "retry.enabled=true"] if retry else config


def session_binding(pi_dir: Path, request_id: str, session_id: str | None) -> dict[str, Any]:
    """One task's binding (`ask_` -> the Pi session the app recorded), checked against the agent's own session file:
    `in_session` when a user message of that file carries the `ask_` id; with the file's path and sha256 (hashed from
    the same bytes that were read)."""
    found = sorted((pi_dir / "sessions").glob(f"*_{session_id}.jsonl")) if session_id and "/" not in session_id else []
    binding: dict[str, Any] = {"request_id": request_id, "session_id": session_id,
                               "session_file": str(found[-1]) if found else None, "session_sha256": None,
                               "in_session": False}
    if not found:
        return binding
    raw = found[-1].read_bytes()
    binding["session_sha256"] = hashlib.sha256(raw).hexdigest()
    for line in raw.decode("utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "user" and request_id in json.dumps(message):
            binding["in_session"] = True
    return binding
