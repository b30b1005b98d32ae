"""A team file's settings as the `-c KEY=VALUE` strings `wardian agent start` takes: tables flattened to dotted
keys, each value written back as TOML text in one canonical form, and an agent's own settings merged over its
provider's defaults.

A table (a `[...]` header, or the `a` of a dotted key `a.b = 1`) is descended into; a value given with `=`, an
array or an inline table (`provider = { mock = { ... } }`) included, is one setting, exactly as one `-c` would
give it. An agent's setting replaces a default at the same key, below it, or above it: `model` replaces `model`,
an agent's `provider = {...}` replaces every default under `provider.`.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

Key = tuple[str, ...]
BARE = re.compile(r"[A-Za-z0-9_-]+")


def key_text(path: Key) -> str:
    """`a."b c".d`: each segment bare when it can be, else double-quoted (the form `-c` reads)."""
    return ".".join(s if BARE.fullmatch(s) else f'"{s}"' for s in path)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(value: str) -> str:
    """A TOML basic string: the characters TOML refuses raw in one (the controls, DEL) escaped."""
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def toml_value(value: Any) -> str:
    """A parsed TOML value written back as TOML (one line; inline tables for tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k if BARE.fullmatch(k) else _string(k)} = {toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise TypeError(f"not a TOML value: {type(value).__name__}")


def flatten(table: Mapping[str, Any], at: Key, assigned: set[Key], inline: bool) -> Iterator[tuple[Key, Any]]:
    """Each setting under `table` (found at the document path `at`) as (its key relative to `table`, its value).
    `inline`: `table` is itself an inline table, so nothing under it is descended into."""
    for name, value in table.items():
        path = (*at, name)
        if isinstance(value, dict) and not inline and path not in assigned:
            for sub, leaf in flatten(value, path, assigned, inline=False):
                yield (name, *sub), leaf
        else:
            yield (name,), value


def merge(defaults: Mapping[Key, Any], own: Mapping[Key, Any]) -> dict[Key, Any]:
    """The defaults, less those an own setting replaces (same key, below it or above it), then the own ones."""
    def replaced(key: Key) -> bool:
        return any(key[:len(mine)] == mine or mine[:len(key)] == key for mine in own)

    return {**{k: v for k, v in defaults.items() if not replaced(k)}, **own}
