"""`wardian pi register`: wardian's extension installed for a Pi a person runs themselves
(docs/guide/pi.md#your-own-pi).

Pi loads every `*.ts` file of its agent directory's `extensions/` (`~/.pi/agent/extensions/` unless
`PI_CODING_AGENT_DIR` names another). The extension is written there as `wardian.ts`, with the absolute wardian
command in place of `wardian` on PATH; nothing else there is touched, and a `wardian.ts` that is not ours is
`registration_conflict` (nothing changes). No session is written: the person starts Pi with the agent's variables
(`eval "$(wardian agent env NAME)"`), and without them the extension registers no tool. The person answers its
confirmations in Pi's own interface, so `--approve-tools` has no meaning here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.home import Home
from wardian.providers.mcp_command import SERVE_ARGS, wardian_executable, write_private
from wardian.providers.pi import extension
from wardian.providers.registration import Registration

FIELD = "extensions_dir"
FILE = "wardian.ts"
_DEFAULT = 'const DEFAULT_COMMAND = ["wardian", "mcp", "serve"];'


def _ours(text: str) -> bool:
    return text.startswith(extension.source().split("\n", 1)[0])


def check_registration(extensions_dir: Path, home: Home) -> Path:
    """Check all that `register_session` will; returns the absolute dir. Raises: InvalidArguments,
    RegistrationConflict, CliNotFound (nothing was changed)."""
    target = extensions_dir.expanduser().absolute()
    if target.exists() and not target.is_dir():
        raise errors.InvalidArguments(f"{target} is not a directory", field=FIELD)
    wardian_executable()
    path = target / FILE
    try:
        present = path.read_text(encoding="utf-8") if path.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.InvalidArguments(f"{path} cannot be read ({type(exc).__name__}); nothing was changed",
                                      field=FIELD) from None
    if present is not None and not _ours(present):
        raise errors.RegistrationConflict(f"{path} is an extension that is not wardian's; remove or rename it, then "
                                          "register again. Nothing was changed", field=FIELD)
    return target


def installed_source(command: str) -> str:
    """The extension as installed: the absolute wardian command instead of `wardian` on PATH."""
    text = extension.source()
    return text.replace(_DEFAULT, f"const DEFAULT_COMMAND = {json.dumps([command, *SERVE_ARGS])};", 1)


def register_session(extensions_dir: Path, home: Home, session: str, agent: dict[str, Any],
                     approved: tuple[str, ...]) -> Registration:
    """Install the extension (the session is not written: module docstring). Raises: as `check_registration`."""
    target = check_registration(extensions_dir, home)
    command = str(wardian_executable())
    path = target / FILE
    created = not path.exists()
    target.mkdir(parents=True, exist_ok=True)
    write_private(path, installed_source(command))
    return Registration(path, command, {"name": agent["name"], "uuid": agent["uuid"]}, str(home.root), (), created)
