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
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
from tomlkit.items import Item

from wardian.overrides import parse_override

JOURNAL = "projection.json"
_ABSENT = {"absent": True}


def _load(path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return tomlkit.document()


def _get(doc: Any, path: list[str]) -> Any:
    node = doc
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node.unwrap() if isinstance(node, Item) else node


def _set(doc: Any, path: list[str], value: Any) -> None:
    node = doc
    for part in path[:-1]:
        if part not in node or not isinstance(node[part], dict):
            node[part] = tomlkit.table()
        node = node[part]
    node[path[-1]] = value


def _delete(doc: Any, path: list[str]) -> None:
    node = doc
    parents = []
    for part in path[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        parents.append((node, part))
        node = node[part]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, part in reversed(parents):  # drop tables the projection created and left empty
        if isinstance(parent[part], dict) and not parent[part]:
            del parent[part]
        else:
            break


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def project(codex_home: Path, overrides: list[str]) -> None:
    """Write `overrides` into `codex_home/config.toml`, journaling what they replace."""
    recover(codex_home)
    if not overrides:
        return
    config = codex_home / "config.toml"
    doc = _load(config)
    entries = []
    for override in overrides:
        parsed = parse_override(override)
        path = list(parsed.path)
        entries.append({"path": path, "before": _get(doc, path), "projected": parsed.value})
        _set(doc, path, parsed.value)
    _write_atomic(codex_home / JOURNAL, json.dumps(entries, default=str))
    _write_atomic(config, tomlkit.dumps(doc))


def recover(codex_home: Path) -> bool:
    """Restore an earlier projection (after attachment, or left by a crash). True when one was restored."""
    journal = codex_home / JOURNAL
    try:
        entries = json.loads(journal.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    config = codex_home / "config.toml"
    doc = _load(config)
    for entry in reversed(entries):
        path, before, projected = entry["path"], entry["before"], entry["projected"]
        if _get(doc, path) != projected:
            continue  # the person changed it since: their edit wins
        if before == _ABSENT:
            _delete(doc, path)
        else:
            _set(doc, path, before)
    _write_atomic(config, tomlkit.dumps(doc))
    journal.unlink()
    return True
