"""Launch-settings projection for attached (interactive) agents (contract rule ATT-3;
docs/decisions/0009-attached-mode-and-projection.md).

A background app-server takes the agent's settings as `-c key=value` overrides. An attached agent has two
Codex processes reading the same private `CODEX_HOME`: the app-server and the person's TUI, and some settings
(workspace trust, for one) are only honoured from `config.toml`. So before an attached launch the settings are
written into `config.toml`, and after attachment they are restored.

Invariants:
- A journal (`projection.json`, beside the config) records, for each projected key, the value it had before
  (or that it was absent), and is written (fsync + rename) before `config.toml` changes.
- Restoring puts back the original only where the file still holds the projected value: a key the person
  edited meanwhile keeps their edit. Then the journal is removed.
- A journal found at the next preparation means an interrupted projection: it is restored first, so a removed
  setting never stays enabled merely because an earlier launch used it.
- Comments and every other entry of the file are kept (tomlkit).

The journal itself is every provider's (`wardian.providers.journal`); this module supplies config.toml's format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Item

from wardian.overrides import parse_override
from wardian.providers import journal

JOURNAL = "projection.json"
CONFIG = "config.toml"


def _load(path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return tomlkit.document()


def _get(doc: tomlkit.TOMLDocument, key: tuple[str, ...], default: Any) -> Any:
    node: Any = doc
    for part in key:
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node.unwrap() if isinstance(node, Item) else node


def _set(doc: tomlkit.TOMLDocument, key: tuple[str, ...], value: Any) -> tomlkit.TOMLDocument:
    node: Any = doc
    for part in key[:-1]:
        if part not in node or not isinstance(node[part], dict):
            node[part] = tomlkit.table()  # as `codex -c` does: a key through a value makes that value a table
        node = node[part]
    node[key[-1]] = value
    return doc


def _delete(doc: tomlkit.TOMLDocument, key: tuple[str, ...]) -> tomlkit.TOMLDocument:
    node: Any = doc
    parents: list[tuple[Any, str]] = []
    for part in key[:-1]:
        if not isinstance(node, dict) or part not in node:
            return doc
        parents.append((node, part))
        node = node[part]
    if isinstance(node, dict):
        node.pop(key[-1], None)
    for parent, part in reversed(parents):  # drop tables the projection created and left empty
        if isinstance(parent[part], dict) and not parent[part]:
            del parent[part]
        else:
            break
    return doc


TOML: journal.Format[tomlkit.TOMLDocument] = journal.Format(_load, _get, _set, _delete, tomlkit.dumps)
"""config.toml as the journal edits it (tomlkit, so comments stay)."""


def project(codex_home: Path, overrides: list[str]) -> None:
    """Write `overrides` into `codex_home/config.toml`, journaling what they replace (an earlier projection is
    restored first)."""
    parsed = [parse_override(o) for o in overrides]
    journal.project(TOML, codex_home / CONFIG, codex_home / JOURNAL, [(o.path, o.value) for o in parsed])


def recover(codex_home: Path) -> bool:
    """Restore an earlier projection (after attachment, or left by a crash). True when one was restored."""
    return journal.restore(TOML, codex_home / CONFIG, codex_home / JOURNAL)
