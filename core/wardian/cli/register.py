"""The handler of `wardian <provider> register` (`wardian.cli.registration` adds its parser, and the provider's words
ride along as `args.registration`): check everything, have the app issue the agent a session, write the entry, and
report it."""

from __future__ import annotations

import argparse
from pathlib import Path

from wardian import errors
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.cli.registration import RegisterCommand
from wardian.client import AppClient
from wardian.home import Home, resolve_home
from wardian.protocol.tools import parse_tool_names
from wardian.providers.mcp_command import wardian_executable
from wardian.providers.registration import Registration


def cmd_register(args: argparse.Namespace) -> int:
    """Register (or, without an optional target, show how to), then report; errors are raised for `main`.

    Raises:
        InvalidArguments: the person's own config, an unreadable config, or an unknown tool.
        RegistrationConflict: the config has a `wardian` entry that is not ours.
        CliNotFound: no wardian executable to register.
        AppNotRunning, UnknownAgent, ...: the app could not issue the agent a session.
    """
    command: RegisterCommand = args.registration
    approved = parse_tool_names(args.approve_tools if command.grants is not None else None)
    home = resolve_home(args.home)
    given: str | None = getattr(args, command.target.dest)
    if given is None:
        reg = _unwritten(home, args.agent, approved)
    else:
        registrar = command.registrar()
        target = registrar.check_registration(Path(given), home)
        with AppClient(home) as app:
            issued = app.call("agent/session", {"agent": args.agent})
        reg = registrar.register_session(target, home, issued["session_id"], issued["agent"], approved)
    out(dump(command.summary(reg)) if args.json else "\n".join(command.report(reg)))
    return EXIT_OK


def _unwritten(home: Home, wanted: str, approved: tuple[str, ...]) -> Registration:
    """What a registration would write, for a person to add themselves: no session is issued and no file written.
    Raises: CliNotFound, UnknownAgent, AppNotRunning."""
    command = str(wardian_executable())
    with AppClient(home) as app:
        agents = app.call("agent/list", {})["agents"]
    for agent in agents:
        if wanted in (agent["name"], agent["uuid"]):
            return Registration(None, command, {"name": agent["name"], "uuid": agent["uuid"]}, str(home.root),
                                approved)
    raise errors.UnknownAgent(f"no agent named {wanted[:80]!r}", field="agent")
