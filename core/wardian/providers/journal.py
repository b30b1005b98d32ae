"""The settings journal: an agent's `-c` settings written into its provider's own config file, and undone at the
next start (Claude Code's `settings.json`, OpenCode's `opencode.json`, Codex's `config.toml` for an attached launch:
contract rule ATT-3, docs/decisions/0009-attached-mode-and-projection.md).

Invariants:
- A journal beside the file records, for each key set, what it held before (`ABSENT`: nothing) and the value set;
  it is written (fsync, rename, 0600) before the file changes.
- `restore` puts back what a key held only where the file still holds the value set: a key the person edited
  meanwhile keeps their edit. Then the journal goes. `project` restores first, so a setting removed from the
  agent's `-c` list never stays merely because an earlier start wrote it, nor does one a crash left behind.
- Every key is set before anything is written: a key the file cannot take (`ValueError` from the format) is
  `InvalidArguments` and changes nothing.

A provider supplies its file's `Format` (the functions that load it, read, set and delete a dotted key, and dump it;
`JSON` for a file holding one JSON object) and where the file and its journal are.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from wardian import errors
from wardian.providers.mcp_command import read_json_object, write_private

ABSENT: dict[str, Any] = {"absent": True}
"""What the journal records for a key the file did not have."""

Doc = TypeVar("Doc")
Key = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Format(Generic[Doc]):
    """A config file's format, as the journal uses it: its functions."""

    load: Callable[[Path], Doc]
    """The file's document (an empty one when the file is absent). Raises: InvalidArguments (unreadable)."""
    get: Callable[[Doc, Key, Any], Any]
    """The value at a dotted key, else the default given."""
    set: Callable[[Doc, Key, Any], Doc]
    """The document with the key set. Raises: ValueError (why the file cannot take it)."""
    delete: Callable[[Doc, Key], Doc]
    """The document without the key (and without what only it made)."""
    dump: Callable[[Doc], str]


def json_value(value: Any) -> Any:
    """A parsed TOML value as JSON (a TOML date or time becomes its ISO text)."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value


def _set(fmt: Format[Doc], doc: Doc, key: Key, value: Any, file: Path) -> Doc:
    try:
        return fmt.set(doc, key, value)
    except ValueError as exc:
        raise errors.InvalidArguments(f"cannot set {'.'.join(key)} in {file}: {exc}", field="config") from None


def project(fmt: Format[Doc], file: Path, journal: Path, settings: Sequence[tuple[Key, Any]]) -> None:
    """Undo the previous start's settings (`restore`), then set each (key, value) in `file`, journaling what they
    replace. Raises: InvalidArguments (the file cannot be read, or cannot take a key; nothing more was changed)."""
    restore(fmt, file, journal)
    if not settings:
        return
    doc = fmt.load(file)
    entries = []
    for key, value in settings:
        before = fmt.get(doc, key, ABSENT)
        doc = _set(fmt, doc, key, value, file)
        entries.append({"path": list(key), "before": before, "projected": value})
    write_private(journal, json.dumps(entries, default=str))
    write_private(file, fmt.dump(doc))


def restore(fmt: Format[Doc], file: Path, journal: Path) -> bool:
    """Put back what the journaled settings replaced, keeping any value the person edited since; True when a journal
    was found."""
    try:
        entries = json.loads(journal.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    doc = fmt.load(file)
    for entry in reversed(entries):
        key, before, projected = tuple(entry["path"]), entry["before"], entry["projected"]
        if fmt.get(doc, key, ABSENT) != projected:
            continue  # the person changed it since: their edit wins
        doc = fmt.delete(doc, key) if before == ABSENT else _set(fmt, doc, key, before, file)
    write_private(file, fmt.dump(doc))
    journal.unlink()
    return True


def _json_get(doc: dict[str, Any], key: Key, default: Any) -> Any:
    node: Any = doc
    for part in key:
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _json_set(doc: dict[str, Any], key: Key, value: Any) -> dict[str, Any]:
    node = doc
    for i, part in enumerate(key[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ValueError(f"{'.'.join(key[:i + 1])} is not an object")
        node = child
    node[key[-1]] = value
    return doc


def _json_delete(doc: dict[str, Any], key: Key) -> dict[str, Any]:
    parents: list[dict[str, Any]] = [doc]
    for part in key[:-1]:
        child = parents[-1].get(part)
        if not isinstance(child, dict):
            return doc
        parents.append(child)
    parents[-1].pop(key[-1], None)
    for depth in range(len(key) - 2, -1, -1):  # drop the objects the setting alone made
        if parents[depth + 1] == {}:
            parents[depth].pop(key[depth], None)
    return doc


def _json_dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


JSON: Format[dict[str, Any]] = Format(read_json_object, _json_get, _json_set, _json_delete, _json_dump)
"""A file holding one JSON object (Claude Code's `settings.json`): a dotted key runs through nested objects, made as
needed; one through a value that is not an object is refused; deleting a key drops the objects it alone made."""
