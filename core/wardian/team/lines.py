"""Where each key of a TOML document is written: its line, and whether it was given a value (`key = value`) rather
than opened as a table (`[a.b]`, or the `a` of a dotted key `a.b = 1`).

The standard library's parser (`tomllib`) gives the values but no positions, and tomlkit keeps the text but not the
lines either, so this reads the document's text once more: only as far as TOML's lexical rules need to tell a
header, a key and the extent of a value (strings of the four kinds, comments, nested arrays and inline tables)
apart. It runs only on a document `tomllib` has already accepted; each key's path is read by `tomllib` itself, so
quoting and escapes mean exactly what they mean to the parser.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any

Path_ = tuple[str, ...]


@dataclass(slots=True)
class KeyLines:
    """`lines`: the 1-based line on which each table or key path is first named; `assigned`: the paths given a
    value directly (an inline table among them is one value, not a table to descend into)."""

    lines: dict[Path_, int] = field(default_factory=dict)
    assigned: set[Path_] = field(default_factory=set)

    def line_of(self, path: Path_) -> int:
        """The line of `path`, else of its nearest named ancestor (a key inside an inline table), else 1."""
        for end in range(len(path), 0, -1):
            found = self.lines.get(path[:end])
            if found is not None:
                return found
        return 1


def key_path(text: str) -> Path_:
    """The path a TOML key (`a."b c".d`) names, as the parser reads it."""
    node: Any = tomllib.loads(f"{text} = 0")
    path: list[str] = []
    while isinstance(node, dict):
        ((key, node),) = node.items()
        path.append(key)
    return tuple(path)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.found = KeyLines()

    def _to(self, end: int) -> None:
        self.line += self.text.count("\n", self.i, end)
        self.i = end

    def _note(self, path: Path_) -> None:
        for end in range(1, len(path) + 1):
            self.found.lines.setdefault(path[:end], self.line)

    def run(self) -> KeyLines:
        table: Path_ = ()
        n = len(self.text)
        while True:
            self._skip_blank()
            if self.i >= n:
                return self.found
            if self.text[self.i] == "[":
                width = 2 if self.text.startswith("[[", self.i) else 1
                end = self._key_end(self.i + width, "]")
                table = key_path(self.text[self.i + width:end])
                self._note(table)
                self._to(end + width)
            else:
                end = self._key_end(self.i, "=")
                path = table + key_path(self.text[self.i:end])
                self._note(path)
                self.found.assigned.add(path)
                self._to(end + 1)
                self._skip_value()

    def _skip_blank(self) -> None:
        text, n = self.text, len(self.text)
        while self.i < n:
            ch = text[self.i]
            if ch == "#":
                newline = text.find("\n", self.i)
                self._to(n if newline < 0 else newline)
            elif ch in " \t\r\n":
                self._to(self.i + 1)
            else:
                return

    def _key_end(self, start: int, stop: str) -> int:
        """The index of `stop` after a key starting at `start`, past any quoted part of it."""
        i = start
        while self.text[i] != stop:
            i = self._string_end(i) if self.text[i] in "\"'" else i + 1
        return i

    def _string_end(self, i: int) -> int:
        """The index just past the string that starts at `i` (any of TOML's four kinds)."""
        text = self.text
        quote = text[i]
        if text.startswith(quote * 3, i):
            j = i + 3
            while not text.startswith(quote * 3, j):
                j += 2 if quote == '"' and text[j] == "\\" else 1
            end = j + 3
            while end < len(text) and text[end] == quote and end - j < 5:  # up to two quotes end the content
                end += 1
            return end
        j = i + 1
        while text[j] != quote:
            j += 2 if quote == '"' and text[j] == "\\" else 1
        return j + 1

    def _skip_value(self) -> None:
        text, n, depth = self.text, len(self.text), 0
        while self.i < n:
            ch = text[self.i]
            if ch in "\"'":
                self._to(self._string_end(self.i))
            elif ch == "#":
                newline = text.find("\n", self.i)
                self._to(n if newline < 0 else newline)
            elif ch == "\n" and depth == 0:
                return
            else:
                depth += (ch in "[{") - (ch in "]}")
                self._to(self.i + 1)


def scan(text: str) -> KeyLines:
    """The lines and assignments of `text`, a document `tomllib.loads` accepted."""
    return _Scanner(text).run()
