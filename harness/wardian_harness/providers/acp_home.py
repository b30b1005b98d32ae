"""Point an ACP agent at the scripted model, and find the Qwen Code and Gemini CLIs (docs/guide/acp.md).

What each start is given (`acp_launch`: the `-c` and `--env` settings of `wardian agent start`):
- Qwen Code takes an OpenAI-compatible endpoint from its environment (`OPENAI_BASE_URL`, `OPENAI_MODEL`, with a
  key: here a dummy one as a `-c env.` setting; a real one comes from `wardian auth login qwen`);
- Gemini CLI its "gateway" sign-in: Gemini REST under `GOOGLE_GEMINI_BASE_URL` (without the `/v1`), a named model
  (no router request), a dummy key;
- a generic ACP agent here is `opencode acp`, which reads a whole config from `OPENCODE_CONFIG_CONTENT` (an
  OpenAI-compatible provider with a dummy key).

Discovery (`providers.cli`): `WARDIAN_QWEN` / `WARDIAN_GEMINI` when set, else `<repo>/node_modules/.bin/<name>`
(package.json pins both), else the first one on PATH.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from wardian_harness.providers.cli import REPO_ROOT, CliInstall, CliNotFound, find_cli

__all__ = ["ACP_PROVIDERS", "MODEL", "AcpCliNotFound", "acp_launch", "find_acp_cli"]

ACP_PROVIDERS = ("qwen", "gemini", "acp")
MODEL = "scripted-model"
_LABELS = {"qwen": "Qwen Code", "gemini": "Gemini CLI"}


class AcpCliNotFound(CliNotFound):
    """No Qwen Code or Gemini CLI executable at the configured path, in node_modules or on PATH."""

    cli = "an ACP agent's CLI"


def find_acp_cli(name: str, env: Mapping[str, str] | None = None, repo_root: Path = REPO_ROOT) -> CliInstall:
    """The `qwen` or `gemini` CLI to use and its version. Raises: AcpCliNotFound."""
    return find_cli(name, f"WARDIAN_{name.upper()}", type(f"{_LABELS[name]}NotFound", (AcpCliNotFound,),
                                                          {"cli": _LABELS[name]}), env, repo_root)


def acp_launch(provider: str, base_url: str) -> tuple[list[str], list[str]]:
    """The `-c` and `--env` settings pointing an agent of `provider` (qwen, gemini, acp: `opencode acp`) at its
    scripted-model URL (`AgentScript.base_url`)."""
    if provider == "qwen":
        return ['env.OPENAI_API_KEY="sk-scripted-dummy"'], [f"OPENAI_BASE_URL={base_url}", f"OPENAI_MODEL={MODEL}"]
    if provider == "gemini":
        base = base_url.removesuffix("/").removesuffix("/v1")
        return ([f"model.name={json.dumps(MODEL)}", 'env.GEMINI_API_KEY="scripted-dummy"'],
                [f"GOOGLE_GEMINI_BASE_URL={base}"])
    config = {"model": "scripted/model", "small_model": "scripted/model", "provider": {"scripted": {
        "npm": "@ai-sdk/openai-compatible", "name": "Scripted model",
        "options": {"baseURL": base_url, "apiKey": "wardian-scripted-model-dummy-key"},
        "models": {"model": {"tool_call": True}}}}}
    return [], [f"OPENCODE_CONFIG_CONTENT={json.dumps(config)}"]
