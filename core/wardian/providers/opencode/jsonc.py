"""Round-trip edits of OpenCode's JSONC config (`opencode.json`): read a value, set one, delete one, and leave every
other byte of the file as it was (comments, formatting, key order, trailing commas).

OpenCode reads its config as JSONC: JSON plus `//` and `/* */` comments and trailing commas. Registration and `-c` must
keep a person's comments and entries (contract rule CFG-2, as tomlkit does for Codex's TOML); Python has no kept library
that edits JSONC in place (json5 and commentjson drop comments on write), so this module parses the text into spans and
splices the one value it changes.

Invariants:
- `loads` accepts exactly JSON plus comments and trailing commas; anything else is `JsoncError` with a position.
- An edit changes only the bytes of the value it sets (or the member it adds or removes); the rest of the text,
  comments included, is byte-for-byte the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JsoncError", "delete", "dumps_value", "get", "loads", "set_value"]

_ABSENT = object()
_WS = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_LITERALS = {"true": True, "false": False, "null": None}


class JsoncError(ValueError):
    """The text is not JSONC; `pos` is where reading failed."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message} at offset {pos}")
        self.pos = pos


@dataclass
class _Node:
    start: int
    end: int
    value: Any
    members: list[_Member] = field(default_factory=list)  # objects only
    items: list[_Node] = field(default_factory=list)  # arrays only


@dataclass
class _Member:
    key: str
    key_start: int
    node: _Node


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        match = _WS.match(self.text, self.pos)
        assert match is not None
        self.pos = match.end()
        if self.text.startswith("/*", self.pos):
            raise JsoncError("unterminated comment", self.pos)

    def document(self) -> _Node:
        self.skip()
        node = self.value()
        self.skip()
        if self.pos != len(self.text):
            raise JsoncError("unexpected text after the value", self.pos)
        return node

    def value(self) -> _Node:
        text, pos = self.text, self.pos
        if pos >= len(text):
            raise JsoncError("unexpected end of text", pos)
        ch = text[pos]
        if ch == "{":
            return self.object()
        if ch == "[":
            return self.array()
        if ch == '"':
            match = _STRING.match(text, pos)
            if match is None:
                raise JsoncError("bad string", pos)
            self.pos = match.end()
            return _Node(pos, self.pos, json.loads(match.group()))
        match = _NUMBER.match(text, pos)
        if match is not None and match.end() > pos:
            self.pos = match.end()
            return _Node(pos, self.pos, json.loads(match.group()))
        for word, literal in _LITERALS.items():
            if text.startswith(word, pos):
                self.pos = pos + len(word)
                return _Node(pos, self.pos, literal)
        raise JsoncError(f"unexpected character {ch!r}", pos)

    def object(self) -> _Node:
        start = self.pos
        self.pos += 1
        node = _Node(start, start, {})
        self.skip()
        while not self.text.startswith("}", self.pos):
            key_start = self.pos
            key = self.value()
            if not isinstance(key.value, str) or self.text[key_start] != '"':
                raise JsoncError("an object key must be a string", key_start)
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise JsoncError("expected ':'", self.pos)
            self.pos += 1
            self.skip()
            child = self.value()
            node.members.append(_Member(key.value, key_start, child))
            node.value[key.value] = child.value
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
            elif not self.text.startswith("}", self.pos):
                raise JsoncError("expected ',' or '}'", self.pos)
        self.pos += 1
        node.end = self.pos
        return node

    def array(self) -> _Node:
        start = self.pos
        self.pos += 1
        node = _Node(start, start, [])
        self.skip()
        while not self.text.startswith("]", self.pos):
            child = self.value()
            node.items.append(child)
            node.value.append(child.value)
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
            elif not self.text.startswith("]", self.pos):
                raise JsoncError("expected ',' or ']'", self.pos)
        self.pos += 1
        node.end = self.pos
        return node


def _parse(text: str) -> _Node:
    return _Parser(text).document()


def loads(text: str) -> Any:
    """The value of a JSONC text. Raises: JsoncError."""
    return _parse(text).value


def _find(root: _Node, path: tuple[str, ...]) -> tuple[_Node | None, _Member | None, int]:
    """The deepest object on `path` that exists, the member for the next key (if it exists), and how many keys of
    `path` were matched."""
    node: _Node = root
    for depth, key in enumerate(path):
        if not isinstance(node.value, dict):
            return None, None, depth
        member = next((m for m in reversed(node.members) if m.key == key), None)  # the last one wins, as in JSON
        if member is None or depth == len(path) - 1:
            return node, member, depth
        node = member.node
    return node, None, len(path)


def get(text: str, path: tuple[str, ...], default: Any = None) -> Any:
    """The value at `path` (object keys), or `default` (an empty text is an empty object). Raises: JsoncError."""
    value = loads(text) if text.strip() else {}
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return default
        value = value[key]
    return value


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[line_start:])
    return match.group() if match else ""


def _unit(text: str) -> str:
    """The file's indentation step (two spaces when it has none)."""
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else "  "


def dumps_value(value: Any, indent: str = "", unit: str = "  ") -> str:
    """`value` as JSON text, objects and arrays spread over lines at `indent` plus `unit`."""
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def set_value(text: str, path: tuple[str, ...], value: Any) -> str:
    """`text` with the value at `path` set to `value` (intermediate objects created); every other byte kept.

    Raises:
        JsoncError: the text is not JSONC, or something on `path` is not an object.
    """
    if not path:
        raise ValueError("an empty path")
    if not text.strip():
        text = "{}\n"
    root = _parse(text)
    if not isinstance(root.value, dict):
        raise JsoncError("the config is not a JSON object", root.start)
    unit = _unit(text)
    parent, member, depth = _find(root, path)
    if parent is None:
        raise JsoncError(f"{'.'.join(path[:depth])} is not an object", 0)
    if member is not None and depth == len(path) - 1:
        indent = _line_indent(text, member.key_start)
        return text[:member.node.start] + dumps_value(value, indent, unit) + text[member.node.end:]
    if member is not None:
        raise JsoncError(f"{'.'.join(path[:depth + 1])} is not an object", member.node.start)
    nested: Any = value
    for key in reversed(path[depth + 1:]):
        nested = {key: nested}
    return _insert(text, parent, path[depth], nested, unit)


def _insert(text: str, obj: _Node, key: str, value: Any, unit: str) -> str:
    if obj.members:
        last = obj.members[-1]
        indent = _line_indent(text, last.key_start)
        entry = f"{json.dumps(key, ensure_ascii=False)}: {dumps_value(value, indent, unit)}"
        return text[:last.node.end] + f",\n{indent}{entry}" + text[last.node.end:]
    outer = _line_indent(text, obj.start)
    indent = outer + unit
    entry = f"{json.dumps(key, ensure_ascii=False)}: {dumps_value(value, indent, unit)}"
    inner = text[obj.start + 1:obj.end - 1]
    if inner.strip():  # only comments inside: keep them, add the member after the opening brace
        return text[:obj.start + 1] + f"\n{indent}{entry}," + text[obj.start + 1:]
    return text[:obj.start] + "{\n" + indent + entry + "\n" + outer + "}" + text[obj.end:]


def delete(text: str, path: tuple[str, ...]) -> str:
    """`text` without the member at `path` (and its separating comma); unchanged when it is absent.

    Raises:
        JsoncError: the text is not JSONC.
    """
    root = _parse(text)
    parent, member, depth = _find(root, path)
    if parent is None or member is None or depth != len(path) - 1:
        return text
    index = parent.members.index(member)
    start = member.key_start
    end = member.node.end
    after = _WS.match(text, end)
    assert after is not None
    if text.startswith(",", after.end()):
        end = after.end() + 1
    elif index > 0:
        previous = parent.members[index - 1].node.end
        comma = text.find(",", previous, start)
        if comma >= 0:
            start = comma
    # Take the member's own line with it when it stands alone there.
    line_start = text.rfind("\n", 0, start) + 1
    if not text[line_start:start].strip() and (text.find("\n", end) >= 0):
        rest_end = text.find("\n", end)
        if not text[end:rest_end].strip():
            start, end = line_start, rest_end + 1
    return text[:start] + text[end:]
