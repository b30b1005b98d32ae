"""Point an OpenCode agent at the scripted model, and find the OpenCode CLI (docs/providers/opencode.md).

The settings are the ones verified offline in docs/providers/opencode.md: a provider through OpenCode's
bundled `@ai-sdk/openai-compatible` whose `baseURL` is the agent's scripted-model URL (OpenCode then POSTs to
`{baseURL}/chat/completions`, which `ScriptedModel` answers in the chat dialect), one model with tool calls, used as
both `model` and `small_model`. They are given as `wardian agent start NAME -c key=value` settings, which the app
writes into the agent's private `opencode.json` (`opencode_overrides`).

Discovery: `WARDIAN_OPENCODE` when set (it must exist), else `<repo>/node_modules/.bin/opencode` (package.json pins
opencode-ai), else the first `opencode` on PATH.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wardian_harness.providers.cli import REPO_ROOT, CliInstall, CliNotFound, find_cli

__all__ = ["OPENCODE_ENV", "OpenCodeNotFound", "ScriptedOpenCode", "find_opencode", "opencode_overrides"]

OPENCODE_ENV = "WARDIAN_OPENCODE"


class OpenCodeNotFound(CliNotFound):
    """No OpenCode executable at the configured path, in node_modules or on PATH."""

    cli = "OpenCode"


def find_opencode(env: Mapping[str, str] | None = None, repo_root: Path = REPO_ROOT) -> CliInstall:
    """The OpenCode CLI to use and its version (`providers.cli`'s discovery, by `WARDIAN_OPENCODE`).

    Raises:
        OpenCodeNotFound: nothing found, or what was found does not print a version.
    """
    return find_cli("opencode", OPENCODE_ENV, OpenCodeNotFound, env, repo_root)


@dataclass(frozen=True, slots=True)
class ScriptedOpenCode:
    """The opencode.json settings that point one OpenCode agent at a scripted-model base URL."""

    base_url: str  # AgentScript.base_url: http://127.0.0.1:PORT/agents/<name>/v1
    provider_id: str = "scripted"
    model: str = "model"


def opencode_overrides(provider: ScriptedOpenCode) -> list[str]:
    """`-c key=value` settings (TOML values) for `wardian agent start NAME` of an OpenCode agent."""
    p = f"provider.{provider.provider_id}"
    return [
        f'{p}.npm="@ai-sdk/openai-compatible"',
        f'{p}.name="Scripted model"',
        f"{p}.options.baseURL={json.dumps(provider.base_url)}",
        f'{p}.options.apiKey="wardian-scripted-model-dummy-key"',
        f"{p}.models.{provider.model}.tool_call=true",
        f'model="{provider.provider_id}/{provider.model}"',
        f'small_model="{provider.provider_id}/{provider.model}"',
    ]
