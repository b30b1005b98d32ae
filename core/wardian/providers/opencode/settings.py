"""An OpenCode agent's `-c key=value` settings, written into its private `opencode.json` and undone at the next start.

`wardian agent start NAME -c model="wardian/scripted" -c provider.wardian.options.baseURL="http://…"` sets keys of
the agent's own config, kept with the agent (like Codex's `-c`) and applied at each start; a value is TOML, else JSON
(`-c 'provider={"wardian": {…}}'`, `wardian.overrides`), else refused. A journal beside the config records what each
key held before; the next start restores it first, so a setting removed from the agent's `-c` list does not stay
merely because an earlier start wrote it, and a value the person edited since keeps their edit (the rules of Codex's
attached-mode projection: one settings journal, `wardian.providers.journal`).
"""

from __future__ import annotations

from pathlib import Path

from wardian.overrides import ValueSyntax, parse_override
from wardian.providers import journal
from wardian.providers.journal import json_value
from wardian.providers.opencode import jsonc
from wardian.providers.opencode.registration import config_file, read_config

JOURNAL = "wardian-settings.json"


JSONC: journal.Format[str] = journal.Format(read_config, jsonc.get, jsonc.set_value, jsonc.delete, str)
"""OpenCode's config as the journal edits it: JSONC text, changed in place so comments and layout stay."""


def apply(config_dir: Path, overrides: list[str]) -> None:
    """Undo the previous start's settings, then write `overrides` into the config, journaling what they replace.

    Raises:
        InvalidArguments: an override is malformed, or the config is not JSONC (nothing was changed).
    """
    parsed = [parse_override(o, ValueSyntax.TOML_OR_JSON) for o in overrides]  # all checked before anything changes
    journal.project(JSONC, config_file(config_dir), config_dir / JOURNAL,
                    [(o.path, json_value(o.value)) for o in parsed])
