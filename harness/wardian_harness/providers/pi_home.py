"""Point a Pi agent at the scripted model, and find the Pi CLI (docs/guide/pi.md).

Pi takes a model provider of its own from the agent's `models.json` (`-c models.…` settings): here an
`openai-completions` provider at the agent's scripted-model URL (the Chat dialect) with a dummy key (a real one comes
from `wardian auth login pi`), chosen as the default in its `settings.json`.

Discovery (`providers.cli`): `WARDIAN_PI` when set, else `<repo>/node_modules/.bin/pi` (package.json pins it), else
the first one on PATH.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from wardian_harness.providers.cli import REPO_ROOT, CliInstall, CliNotFound, find_cli

__all__ = ["MODEL", "PiNotFound", "find_pi", "pi_settings"]

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
