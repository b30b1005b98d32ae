"""A Claude Code agent's `-c key=value` settings, written into its private `settings.json` and undone at the next start.

`wardian agent start NAME -c model="claude-sonnet-5-5" -c 'env.ANTHROPIC_BASE_URL="http://…"' -c
'permissions.allow=["Bash(git:*)"]'` sets keys of the agent's own `$CLAUDE_CONFIG_DIR/settings.json` (Claude Code's
user settings; https://docs.anthropic.com/en/docs/claude-code/settings), kept with the agent and applied at each
start; a value is TOML, else JSON (`wardian.overrides`), else refused. A journal beside the file records what each
key held before; the next start restores it first, so a setting removed from the agent's `-c` list does not stay
merely because an earlier start wrote it, and a value the person edited since keeps their edit (the one settings
journal of every provider, `wardian.providers.journal`).

A secret never reaches the file: a setting of `env.<NAME>` whose name looks like a secret (`*KEY*`, `*TOKEN*`,
`*SECRET*`, `*PASSWORD*`, the names `wardian.overrides` masks) is given to the process's environment instead, where
Claude Code reads it the same way (`-c env.ANTHROPIC_API_KEY="sk-…"`), so nothing under the agent's folder holds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.overrides import SECRET_KEY_PARTS, Override, ValueSyntax, parse_override
from wardian.providers import journal
from wardian.providers.journal import JSON, json_value

SETTINGS = "settings.json"
JOURNAL = "wardian-settings.json"


@dataclass(frozen=True, slots=True)
class Settings:
    """The agent's `-c` settings, split: keys for `settings.json`, and secret `env.*` values for the environment."""

    file: tuple[Override, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def _secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(part in lowered for part in SECRET_KEY_PARTS)


def _env_value(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise errors.InvalidArguments(f"the value of env.{name[:80]} must be a string (an environment variable)",
                                      field="config", allowed='text in quotes, e.g. env.NAME="value"')
    return value


def parse(overrides: list[str] | tuple[str, ...]) -> Settings:
    """Every override checked and split (module docstring). Raises: InvalidArguments (nothing was changed)."""
    kept: list[Override] = []
    env: dict[str, str] = {}
    for text in overrides:
        override = parse_override(text, ValueSyntax.TOML_OR_JSON)
        path, value = override.path, json_value(override.value)
        if len(path) == 2 and path[0] == "env" and _secret_name(path[1]):
            env[path[1]] = _env_value(path[1], value)
            continue
        if path == ("env",) and isinstance(value, dict):
            secrets = {k: _env_value(k, v) for k, v in value.items() if _secret_name(k)}
            env.update(secrets)
            value = {k: v for k, v in value.items() if k not in secrets}
        kept.append(Override(path, value))
    return Settings(tuple(kept), env)


def apply(config_dir: Path, settings: Settings) -> None:
    """Undo the previous start's settings, then write `settings.file` into `settings.json`, journaling what they
    replace. Raises: InvalidArguments (the file is not a JSON object, or a key runs through a non-object)."""
    journal.project(JSON, config_dir / SETTINGS, config_dir / JOURNAL, [(o.path, o.value) for o in settings.file])

