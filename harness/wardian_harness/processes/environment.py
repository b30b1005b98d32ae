"""The environment of a child a test starts, built from an allowlist and never inherited: the developer's HOME, their
providers' homes and keys, and any session of theirs never reach it (docs/design/architecture.md, "The harness").

Invariant: a variable outside `ENV_ALLOWLIST` reaches a child only when its caller sets it by name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ENV_ALLOWLIST", "allowlisted_env"]

ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM", "COLORTERM", "NO_COLOR",
    "TMPDIR", "TEMP", "TMP",
    # Windows needs these to start processes and find its shell; they name no user home.
    "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "PROGRAMFILES", "PROGRAMDATA",
)
"""Variables copied from the parent environment into a child; everything else is dropped."""


def allowlisted_env(home: Path, parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `ENV_ALLOWLIST` that `parent` (default `os.environ`) holds, with `home` as HOME (and
    USERPROFILE on Windows), so nothing under the developer's real home is read."""
    source = os.environ if parent is None else parent
    env = {key: source[key] for key in ENV_ALLOWLIST if key in source}
    env["HOME"] = str(home)
    if sys.platform == "win32":
        env["USERPROFILE"] = str(home)
    return env
