"""An OpenCode agent's `-c key=value` settings, written into its private `opencode.json` and undone at the next start.

`wardian agent start NAME -c model="wardian/scripted" -c provider.wardian.options.baseURL="http://…"` sets keys of
the agent's own config, kept with the agent (like Codex's `-c`) and applied at each start; a value is TOML, else JSON
(`-c 'provider={"wardian": {…}}'`, `wardian.overrides`), else refused. A journal beside the config records what each
key held before; the next start restores it first, so a setting removed from the agent's `-c` list does not stay
merely because an earlier start wrote it, and a value the person edited since keeps their edit (the rules of Codex's
attached-mode projection, `wardian.providers.codex.projection`).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.overrides import ValueSyntax, parse_override
from wardian.providers.mcp_command import write_private
from wardian.providers.opencode import jsonc
from wardian.providers.opencode.registration import config_file, read_config

JOURNAL = "wardian-settings.json"
_ABSENT = {"absent": True}


def _json_value(value: Any) -> Any:
    """A parsed TOML value as JSON (a TOML date or time becomes its ISO text)."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def apply(config_dir: Path, overrides: list[str]) -> None:
    """Undo the previous start's settings, then write `overrides` into the config, journaling what they replace.

    Raises:
        InvalidArguments: an override is malformed, or the config is not JSONC (nothing was changed).
    """
    parsed = [parse_override(o, ValueSyntax.TOML_OR_JSON) for o in overrides]  # all checked before anything changes
    restore(config_dir)
    if not parsed:
        return
    path = config_file(config_dir)
    text = read_config(path)
    entries = []
    for override in parsed:
        value = _json_value(override.value)
        before = jsonc.get(text, override.path, _ABSENT)
        try:
            text = jsonc.set_value(text, override.path, value)
        except jsonc.JsoncError as exc:
            raise errors.InvalidArguments(f"cannot set {'.'.join(override.path)} in {path}: {exc}",
                                          field="config") from None
        entries.append({"path": list(override.path), "before": before, "projected": value})
    write_private(config_dir / JOURNAL, json.dumps(entries))
    write_private(path, text)


def restore(config_dir: Path) -> bool:
    """Put back what the previous start's settings replaced, keeping any value the person edited since; True when a
    journal was found."""
    journal = config_dir / JOURNAL
    try:
        entries = json.loads(journal.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    path = config_file(config_dir)
    text = read_config(path)
    for entry in reversed(entries):
        key, before, projected = tuple(entry["path"]), entry["before"], entry["projected"]
        if jsonc.get(text, key, _ABSENT) != projected:
            continue  # the person changed it since: their edit wins
        text = jsonc.delete(text, key) if before == _ABSENT else jsonc.set_value(text, key, before)
    write_private(path, text)
    journal.unlink()
    return True
