"""Launch-setting overrides (`wardian agent start NAME -c key=value`), parsed in one place (stdlib only).

An override is `key.path=VALUE`, the way `codex -c` reads it: a dotted key whose segments are bare
(`A-Z a-z 0-9 _ -`) or double-quoted (`projects."/srv/ws".trust_level`), then `=`, then a TOML value (`"o4-mini"`,
`true`, `[1, 2]`, `{ a = 1 }`); a value that is not TOML is taken as a literal string. Each provider applies the
parsed path and value to its own configuration (Codex: `-c` and config.toml; other providers: their config file).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

from wardian import errors

MAX_OVERRIDES = 64
MAX_OVERRIDE_CHARS = 4096
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_ALLOWED = "key=value, where key is a dotted config path and value is TOML (as `codex -c`)"


@dataclass(frozen=True, slots=True)
class Override:
    path: tuple[str, ...]
    value: Any


def _key_path(key: str) -> list[str] | None:
    path: list[str] = []
    i, n = 0, len(key)
    while True:
        while i < n and key[i] == " ":
            i += 1
        if i < n and key[i] == '"':
            end = key.find('"', i + 1)
            if end < 0 or end == i + 1:
                return None
            path.append(key[i + 1:end])
            i = end + 1
        else:
            match = _BARE.match(key, i)
            if match is None:
                return None
            path.append(match.group())
            i = match.end()
        while i < n and key[i] == " ":
            i += 1
        if i == n:
            return path
        if key[i] != ".":
            return None
        i += 1


def parse_override(text: str) -> Override:
    """`key.path="value"` -> Override(("key", "path"), "value").

    Raises:
        InvalidArguments: too long, no `=`, or a key that is not a dotted path.
    """
    if len(text) > MAX_OVERRIDE_CHARS:
        raise errors.InvalidArguments(f"config override is longer than {MAX_OVERRIDE_CHARS} characters",
                                      field="config", allowed=_ALLOWED)
    key, sep, raw = text.partition("=")
    path = _key_path(key) if sep else None
    if path is None:
        raise errors.InvalidArguments(f"config override {text[:80]!r} is not key=value", field="config",
                                      allowed=_ALLOWED)
    try:
        value: Any = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return Override(tuple(path), value)


def check_override(text: str) -> str:
    """`text`, once it parses (the app's validation of `-c`). Raises: InvalidArguments."""
    parse_override(text)
    return text
