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
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wardian.providers.version import Version

__all__ = ["OPENCODE_ENV", "OpenCodeInstall", "OpenCodeNotFound", "ScriptedOpenCode", "find_opencode",
           "opencode_overrides"]

OPENCODE_ENV = "WARDIAN_OPENCODE"
REPO_ROOT = Path(__file__).resolve().parents[3]


class OpenCodeNotFound(Exception):
    """No OpenCode executable at the configured path, in node_modules or on PATH."""


@dataclass(frozen=True, slots=True)
class OpenCodeInstall:
    executable: Path
    version: Version
    version_output: str


def find_opencode(env: Mapping[str, str] | None = None, repo_root: Path = REPO_ROOT) -> OpenCodeInstall:
    """The OpenCode CLI to use and its version.

    Raises:
        OpenCodeNotFound: nothing found, or what was found does not print a version.
    """
    env = os.environ if env is None else env
    configured = env.get(OPENCODE_ENV)
    candidates = [Path(configured)] if configured else [repo_root / "node_modules" / ".bin" / "opencode"]
    if not configured and (found := shutil.which("opencode", path=env.get("PATH", ""))):
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            out = subprocess.run([str(path), "--version"], capture_output=True, text=True, encoding="utf-8",
                                 timeout=60, check=False, stdin=subprocess.DEVNULL).stdout.strip()
            try:
                return OpenCodeInstall(path, Version.parse(out), out)
            except ValueError:
                raise OpenCodeNotFound(f"{path} --version printed {out[:80]!r}, not a version") from None
    raise OpenCodeNotFound("OpenCode CLI not found; tried " + ", ".join(map(str, candidates))
                           + f". Install it (npm install in the repo) or set {OPENCODE_ENV}.")


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
