"""Point a private Codex home at the scripted model, and build the allowlisted environment for its child.

The settings are the ones verified offline in docs/providers/codex.md: a `mock` model provider with
`wire_api = "responses"`, an `env_key` whose variable holds a dummy key, `requires_openai_auth = false`, no
retries, `approval_policy = "never"`, `sandbox_mode = "read-only"`, and `[features] plugins = false, apps = false`
(which stops the offline plugin-sync attempts). They can be written into `CODEX_HOME/config.toml`
(`write_codex_config`, which keeps every other table, e.g. the `[mcp_servers.wardian]` registration written by
core) or passed as `codex -c key=value` overrides (`codex_overrides`); both forms were checked against the real
binary in `tests/harness/`.

Invariants:
- The child environment is built from an allowlist (`codex_env`, on `processes.environment`): the developer's
  HOME, CODEX_HOME, OpenAI keys and any other variable never reach Codex unless a caller passes them explicitly in
  `extra`.
- The dummy key is not a secret; nothing here reads or writes `auth.json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from wardian_harness.processes.environment import allowlisted_env

__all__ = [
    "DUMMY_API_KEY",
    "ScriptedProvider",
    "codex_env",
    "codex_override_args",
    "codex_overrides",
    "write_codex_config",
]

DUMMY_API_KEY = "wardian-scripted-model-dummy-key"
"""The value given to the provider's `env_key` variable; Codex sends it as `Authorization: Bearer <value>`."""

@dataclass(frozen=True, slots=True)
class ScriptedProvider:
    """The Codex model-provider settings that point one agent at a scripted model base URL."""

    base_url: str  # e.g. AgentScript.base_url: http://127.0.0.1:PORT/agents/<name>/v1
    model: str = "mock-model"
    provider_id: str = "mock"
    env_key: str = "WARDIAN_SCRIPTED_MODEL_KEY"
    stream_idle_timeout_ms: int = 30_000
    approval_policy: str = "never"
    sandbox_mode: str = "read-only"

    def provider_table(self) -> dict[str, Any]:
        """The `[model_providers.<provider_id>]` table."""
        return {
            "name": "Wardian scripted model",
            "base_url": self.base_url,
            "wire_api": "responses",
            "env_key": self.env_key,
            "requires_openai_auth": False,
            "request_max_retries": 0,
            "stream_max_retries": 0,
            "stream_idle_timeout_ms": self.stream_idle_timeout_ms,
        }

    def settings(self) -> dict[str, Any]:
        """Every setting as a nested mapping, in config.toml order."""
        return {
            "model": self.model,
            "model_provider": self.provider_id,
            "approval_policy": self.approval_policy,
            "sandbox_mode": self.sandbox_mode,
            "model_providers": {self.provider_id: self.provider_table()},
            "features": {"plugins": False, "apps": False},
        }


def write_codex_config(codex_home: Path, provider: ScriptedProvider) -> Path:
    """Create `codex_home` (0700) if needed and set the provider settings in its `config.toml`; return its path.

    Other keys and tables already in the file (MCP registrations, project trust) are kept; only the keys in
    `provider.settings()` are replaced, and only the `<provider_id>` entry of `model_providers`.
    """
    codex_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = codex_home / "config.toml"
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    settings = provider.settings()
    # Top-level scalars must precede every table in TOML; tomlkit places new ones before existing tables.
    for key in ("model", "model_provider", "approval_policy", "sandbox_mode"):
        doc[key] = settings[key]
    providers = doc.get("model_providers")
    if providers is None:
        providers = tomlkit.table(is_super_table=True)
        doc["model_providers"] = providers
    providers[provider.provider_id] = _table(settings["model_providers"][provider.provider_id])
    features = doc.get("features")
    if features is None:
        doc["features"] = _table(settings["features"])
    else:
        features.update(settings["features"])
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


def codex_overrides(provider: ScriptedProvider) -> list[str]:
    """The same settings as `key=value` strings for `codex -c`, one dotted key per leaf (TOML values)."""
    return [f"{key}={_toml_value(value)}" for key, value in _leaves(provider.settings())]


def codex_override_args(provider: ScriptedProvider) -> list[str]:
    """`codex_overrides` as argv: `["-c", "model=\"mock-model\"", "-c", ...]`."""
    return [arg for override in codex_overrides(provider) for arg in ("-c", override)]


def codex_env(codex_home: Path, *, home: Path, provider: ScriptedProvider | None = None,
              extra: Mapping[str, str] | None = None, parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a Codex child: the allowlist from `parent` (default `os.environ`), private homes, key.

    `home` becomes HOME (and USERPROFILE on Windows) so nothing under the developer's real home is read;
    `provider.env_key` is set to `DUMMY_API_KEY`; `extra` is applied last and is the only way to add more.
    """
    env = allowlisted_env(home, parent)
    env["CODEX_HOME"] = str(codex_home)
    if provider is not None:
        env[provider.env_key] = DUMMY_API_KEY
    env.update(extra or {})
    return env


def _table(values: Mapping[str, Any]) -> Any:
    table = tomlkit.table()
    for key, value in values.items():
        table[key] = value
    return table


def _leaves(values: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in values.items():
        dotted = f"{prefix}{_toml_key(key)}"
        if isinstance(value, Mapping):
            out.extend(_leaves(value, dotted + "."))
        else:
            out.append((dotted, value))
    return out


def _toml_key(key: str) -> str:
    return tomlkit.key(key).as_string()


def _toml_value(value: Any) -> str:
    return tomlkit.item(value).as_string()
