"""`wardian <provider> register`: one command, built for each provider a person may run themselves (`cli.codex`,
`cli.opencode`, `cli.claude` supply its words), that registers `wardian mcp serve` for one managed agent in that
provider's config.

Everything is checked before the app is asked for the agent's session, and the config is written only after (the
provider's `registration` module holds those rules, `wardian.providers.registration` the ones they share); the
session secret is written into the config, never printed. A provider whose target is optional (Claude Code's
`--config-dir`) prints, without it, only what a person would add themselves.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from wardian import errors
from wardian.cli.common import Commands
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import Home, resolve_home

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from wardian.providers.registration import Registrar, Registration


class Target:
    """The option naming where a provider's entry goes (`--codex-home`, `--config-dir`)."""

    def __init__(self, flag: str, help_: str, *, required: bool = True) -> None:
        self.flag = flag
        self.dest = flag.removeprefix("--").replace("-", "_")
        self.help = help_
        self.required = required


class Grants:
    """`--approve-tools`, for a provider that asks before a tool: how it is shown."""

    def __init__(self, help_: str, metavar: str | None = None) -> None:
        self.help = help_
        self.metavar = metavar


class RegisterCommand:
    """One provider's `register`: its words (`title`, `help`, the options' help, `summary` for `--json`, `report`
    otherwise) and its `registrar` (loaded when the command runs: a provider's stack is never part of another
    command's start)."""

    def __init__(self, provider: str, title: str, help_: str, target: Target, *,
                 registrar: Callable[[], Registrar], summary: Callable[[Registration], dict[str, Any]],
                 report: Callable[[Registration], list[str]], grants: Grants | None = None) -> None:
        self.provider = provider
        self.title = title
        self.help = help_
        self.target = target
        self.grants = grants
        self.registrar = registrar
        self.summary = summary
        self.report = report

    def add(self, commands: Commands) -> None:
        """Add `wardian <provider> register` (a command group's `register`)."""
        group = commands.group(self.provider, self.title)
        p = commands.add(group, "register", self.run, self.help)
        target = self.target
        p.add_argument(target.flag, dest=target.dest, required=target.required, default=None, help=target.help)
        p.add_argument("--agent", required=True, help="the managed agent's name or UUID")
        if self.grants is not None:
            p.add_argument("--approve-tools", dest="approve_tools", default=None, metavar=self.grants.metavar,
                           help=self.grants.help)

    def run(self, args: argparse.Namespace) -> int:
        """Register (or, without an optional target, show how to), then report; errors are raised for `main`.

        Raises:
            InvalidArguments: the person's own config, an unreadable config, or an unknown tool.
            RegistrationConflict: the config has a `wardian` entry that is not ours.
            CliNotFound: no wardian executable to register.
            AppNotRunning, UnknownAgent, ...: the app could not issue the agent a session.
        """
        from wardian.client import AppClient  # the client and the protocol's tool table: only when a command runs
        from wardian.protocol.tools import parse_tool_names

        approved = parse_tool_names(args.approve_tools if self.grants is not None else None)
        home = resolve_home(args.home)
        given: str | None = getattr(args, self.target.dest)
        if given is None:
            reg = _unwritten(home, args.agent, approved)
        else:
            registrar = self.registrar()
            target = registrar.check_registration(Path(given), home)
            with AppClient(home) as app:
                issued = app.call("agent/session", {"agent": args.agent})
            reg = registrar.register_session(target, home, issued["session_id"], issued["agent"], approved)
        out(dump(self.summary(reg)) if args.json else "\n".join(self.report(reg)))
        return EXIT_OK


def _unwritten(home: Home, wanted: str, approved: tuple[str, ...]) -> Registration:
    """What a registration would write, for a person to add themselves: no session is issued and no file written.
    Raises: CliNotFound, UnknownAgent, AppNotRunning."""
    from wardian.client import AppClient
    from wardian.providers.mcp_command import wardian_executable
    from wardian.providers.registration import Registration

    command = str(wardian_executable())
    with AppClient(home) as app:
        agents = app.call("agent/list", {})["agents"]
    for agent in agents:
        if wanted in (agent["name"], agent["uuid"]):
            return Registration(None, command, {"name": agent["name"], "uuid": agent["uuid"]}, str(home.root),
                                approved)
    raise errors.UnknownAgent(f"no agent named {wanted[:80]!r}", field="agent")
