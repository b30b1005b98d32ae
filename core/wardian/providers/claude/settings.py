"""A Claude Code agent's `-c key=value` settings, written into its private `settings.json` and undone at the next start.

`wardian agent start NAME -c model="claude-sonnet-5-5" -c 'env.ANTHROPIC_BASE_URL="http://…"' -c
'permissions.allow=["Bash(git:*)"]'` sets keys of the agent's own `$CLAUDE_CONFIG_DIR/settings.json` (Claude Code's
user settings; https://docs.anthropic.com/en/docs/claude-code/settings), kept with the agent and applied at each
start; a value is TOML, else JSON (`wardian.overrides`), else refused. A journal beside the file records what each
key held before; the next start restores it first, so a setting removed from the agent's `-c` list does not stay
merely because an earlier start wrote it, and a value the person edited since keeps their edit (the rule of the
Codex and OpenCode settings).

A secret never reaches the file: a setting of `env.<NAME>` whose name looks like a secret (`*KEY*`, `*TOKEN*`,
`*SECRET*`, `*PASSWORD*`, the names `wardian.overrides` masks) is given to the process's environment instead, where
Claude Code reads it the same way (`-c env.ANTHROPIC_API_KEY="sk-…"`), so nothing under the agent's folder holds it.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.overrides import SECRET_KEY_PARTS, Override, ValueSyntax, parse_override
from wardian.providers.mcp_command import write_private

SETTINGS = "settings.json"
JOURNAL = "wardian-settings.json"
_ABSENT: dict[str, Any] = {"absent": True}


@dataclass(frozen=True, slots=True)
class Settings:
    """The agent's `-c` settings, split: keys for `settings.json`, and secret `env.*` values for the environment."""

    file: tuple[Override, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def _json_value(value: Any) -> Any:
    """A parsed TOML value as JSON (a TOML date or time becomes its ISO text)."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


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
        path, value = override.path, _json_value(override.value)
        if len(path) == 2 and path[0] == "env" and _secret_name(path[1]):
            env[path[1]] = _env_value(path[1], value)
            continue
        if path == ("env",) and isinstance(value, dict):
            secrets = {k: _env_value(k, v) for k, v in value.items() if _secret_name(k)}
            env.update(secrets)
            value = {k: v for k, v in value.items() if k not in secrets}
        kept.append(Override(path, value))
    return Settings(tuple(kept), env)


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object ({} when absent). Raises: InvalidArguments (not JSON, or not an object)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise errors.InvalidArguments(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed",
                                      field="config") from None
    if not isinstance(value, dict):
        raise errors.InvalidArguments(f"{path} is not a JSON object; fix it first, nothing was changed",
                                      field="config")
    return value


def _get(doc: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _ABSENT
        node = node[key]
    return node


def _set(doc: dict[str, Any], path: tuple[str, ...], value: Any, where: Path) -> None:
    node = doc
    for i, key in enumerate(path[:-1]):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise errors.InvalidArguments(
                f"cannot set {'.'.join(path)} in {where}: {'.'.join(path[:i + 1])} is not an object", field="config")
        node = child
    node[path[-1]] = value


def _delete(doc: dict[str, Any], path: tuple[str, ...]) -> None:
    parents: list[dict[str, Any]] = [doc]
    for key in path[:-1]:
        child = parents[-1].get(key)
        if not isinstance(child, dict):
            return
        parents.append(child)
    parents[-1].pop(path[-1], None)
    for depth in range(len(path) - 2, -1, -1):  # drop the objects the setting alone made
        if parents[depth + 1] == {}:
            parents[depth].pop(path[depth], None)


def _write(path: Path, doc: dict[str, Any]) -> None:
    write_private(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def apply(config_dir: Path, settings: Settings) -> None:
    """Undo the previous start's settings, then write `settings.file` into `settings.json`, journaling what they
    replace. Raises: InvalidArguments (the file is not a JSON object, or a key runs through a non-object)."""
    restore(config_dir)
    if not settings.file:
        return
    path = config_dir / SETTINGS
    doc = read_settings(path)
    entries = []
    for override in settings.file:
        before = _get(doc, override.path)
        _set(doc, override.path, override.value, path)
        entries.append({"path": list(override.path), "before": before, "projected": override.value})
    write_private(config_dir / JOURNAL, json.dumps(entries))
    _write(path, doc)


def restore(config_dir: Path) -> bool:
    """Put back what the previous start's settings replaced, keeping any value the person edited since; True when a
    journal was found."""
    journal = config_dir / JOURNAL
    try:
        entries = json.loads(journal.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    path = config_dir / SETTINGS
    doc = read_settings(path)
    for entry in reversed(entries):
        key, before, projected = tuple(entry["path"]), entry["before"], entry["projected"]
        if _get(doc, key) != projected:
            continue  # the person changed it since: their edit wins
        if before == _ABSENT:
            _delete(doc, key)
        else:
            _set(doc, key, before, path)
    _write(path, doc)
    journal.unlink()
    return True
