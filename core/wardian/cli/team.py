"""`wardian init|up|down|status`: the team file (`wardian.toml`, docs/guide/team-file.md): writing one here, and
making the home's team what it says in `wardian.cli.up`."""

from __future__ import annotations

import argparse

from wardian.cli import up
from wardian.cli.common import Commands
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out

DEFAULT_FILE = "wardian.toml"  # wardian.team.DEFAULT_FILE, without importing the package for every parser


def register(commands: Commands) -> None:
    _init(commands)
    up.register(commands)


def _init(commands: Commands) -> None:
    p = commands.single("init", cmd_init, "write a commented team file (wardian.toml) with a lead and a worker",
                        description="Write a commented team file: a lead and a worker of the chosen providers, "
                        "every key explained. Edit it, then `wardian up`.")
    p.add_argument("file", nargs="?", default=DEFAULT_FILE, metavar="FILE",
                   help=f"the file to write (default: ./{DEFAULT_FILE})")
    p.add_argument("--providers", default=None, metavar="P[,P...]",
                   help="the lead's provider, then one worker's per further one (codex, opencode, claude); one "
                   "provider: a lead and a worker of it (default: codex)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")


def cmd_init(args: argparse.Namespace) -> int:
    from wardian.team.init import parse_providers, roster, write_team_file

    providers = parse_providers(args.providers)
    path = write_team_file(args.file, providers, force=args.force)
    agents = roster(providers)
    if args.json:
        out(dump({"path": str(path), "agents": [{"name": n, "provider": p} for n, p in agents]}))
    else:
        team = ", ".join(f"{n} ({p})" for n, p in agents)
        out(f"wrote {path}: {team}; edit it, then `wardian up`")
    return EXIT_OK
