"""`wardian <provider> register`: one command, built for each provider a person may run themselves (`cli.codex`,
`cli.opencode`, `cli.claude` supply its words), that registers `wardian mcp serve` for one managed agent in that
provider's config.

Everything is checked before the app is asked for the agent's session, and the config is written only after (the
provider's `registration` module holds those rules, `wardian.providers.registration` the ones they share); the
session secret is written into the config, never printed. A provider whose target is optional (Claude Code's
`--config-dir`) prints, without it, only what a person would add themselves.

This module holds the command's words and parser; its handler is `wardian.cli.register`'s, named by where it is (the
provider's words ride along as `args.registration`): the client, the tool table and the shared registration rules
load only when a `register` runs, never for the whole parser that `--help` builds.
"""

from __future__ import annotations

from collections.abc import Callable

from wardian.cli.common import Commands

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
        p = commands.add(group, "register", "wardian.cli.register:cmd_register", self.help)
        p.set_defaults(registration=self)
        target = self.target
        p.add_argument(target.flag, dest=target.dest, required=target.required, default=None, help=target.help)
        p.add_argument("--agent", required=True, help="the managed agent's name or UUID")
        if self.grants is not None:
            p.add_argument("--approve-tools", dest="approve_tools", default=None, metavar=self.grants.metavar,
                           help=self.grants.help)
