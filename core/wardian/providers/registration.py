"""The rules every provider's registration of `wardian mcp serve` follows (contract rules CFG-1, CFG-2, APR-2;
docs/design/contract.md), written once; each provider keeps only its file's format and its entry's keys.

- The person's own provider config is never written: registration goes into an agent's private config dir
  (`target_dir`).
- An entry named `wardian` that is not ours is reported (`registration_conflict`) and nothing changes
  (`existing_entry`). Ours launches a wardian executable with `mcp serve` for the same WARDIAN_HOME
  (`launches_wardian`); inside it only our keys are written, so `enabled`, other variables and comments stay.
- Everything is checked before the app is asked for a session, and the session secret goes only into the file
  (0600, `mcp_command.write_private`), never into what is printed (`Registration`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from wardian import errors
from wardian.home import ENV_HOME, Home
from wardian.protocol.tools import SERVER_NAME
from wardian.providers.mcp_command import SERVE_ARGS, WARDIAN_EXECUTABLES


@dataclass(frozen=True, slots=True)
class Registration:
    """What a registration wrote, for the CLI to report (never the session)."""

    config_path: Path | None
    """The file the entry went into (None: nothing was written; only the equivalent is shown)."""
    command: str
    """The wardian executable the entry launches (with `mcp serve`)."""
    agent: dict[str, Any]
    """The agent whose session it holds: its `name` and `uuid`."""
    home: str
    approved: tuple[str, ...] = ()
    """The tools granted without asking (`--approve-tools`), for a provider that asks before tools."""
    created: bool = False
    """The entry was new (False: our earlier entry was updated)."""
    enabled: bool = True
    """False: the person had disabled our entry, and it was left disabled."""
    server: str = SERVER_NAME
    """The entry's name."""
    args: tuple[str, ...] = SERVE_ARGS
    """What the entry passes `command`."""


class Registrar(Protocol):
    """What `wardian <provider> register` needs of a provider (its `registration` module): a check of everything
    before the app is asked for a session, then the write."""

    def check_registration(self, target: Path, home: Home, /) -> Path:
        """The absolute dir to register into. Raises: InvalidArguments, RegistrationConflict, CliNotFound."""
        ...

    def register_session(self, target: Path, home: Home, session: str, agent: dict[str, Any],
                         approved: tuple[str, ...], /) -> Registration:
        """Write the entry with `session` (and the grants `approved`). Raises: as `check_registration`."""
        ...


def target_dir(given: Path, persons_own: Sequence[Path], refusal: str, *, field: str) -> Path:
    """`given` as an absolute dir to register into.

    Raises:
        InvalidArguments: it is one of `persons_own` (the person's own config; `refusal` says so, `{dir}` naming
            it).
    """
    target = given.expanduser().absolute()
    if target.resolve() in {own.resolve() for own in persons_own}:
        raise errors.InvalidArguments(refusal.format(dir=target), field=field)
    return target


def launches_wardian(command: Any, args: Any, env: Any, home: Home) -> bool:
    """Whether an entry's command, arguments and environment are ours: a wardian executable, `mcp serve`, this
    home."""
    return (isinstance(command, str) and Path(command).name in WARDIAN_EXECUTABLES
            and list(args or []) == list(SERVE_ARGS) and isinstance(env, dict)
            and env.get(ENV_HOME) == str(home.root))


def existing_entry(servers: Any, path: Path, home: Home, *, key: str, kind: str, field: str,
                   ours: Callable[[Any, Home], bool]) -> Any:
    """Our `wardian` entry among `servers` (the config's `key`, None when absent), or None when there is none;
    `ours(entry, home)` says whether an entry is this home's wardian.

    Raises:
        RegistrationConflict: `servers` is not `kind` (`a table`, `an object`), or its `wardian` entry is not ours.
    """
    if servers is None:
        return None
    if not isinstance(servers, dict):
        raise errors.RegistrationConflict(f"`{key}` in {path} is not {kind}; nothing was changed", field=field)
    entry: Any = servers.get(SERVER_NAME)
    if entry is not None and not ours(entry, home):
        shown = json.dumps(entry.get("command") if isinstance(entry, dict) else entry, default=str)[:200]
        raise errors.RegistrationConflict(
            f"{path} already has an MCP server named {SERVER_NAME!r} that is not this home's wardian (command "
            f"{shown}); remove or rename it, then register again. Nothing was changed", field=field)
    return entry
