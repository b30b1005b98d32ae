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
    p.add_argument("--schema", action="store_true",
                   help="also write the team file's JSON Schema beside it (wardian.schema.json) for editors, and point "
                   "a new file's first line at it; an existing team file is kept and only the schema is brought up to "
                   "date")


def cmd_init(args: argparse.Namespace) -> int:
    from pathlib import Path

    from wardian.team.init import SCHEMA_NAME, parse_providers, roster, schema_path, write_schema, write_team_file

    providers = parse_providers(args.providers)
    if args.schema:
        schema_path(Path(args.file))  # refused before the team file is written
    keep = args.schema and not args.force and Path(args.file).exists()  # --schema alone refreshes the schema
    path = Path(args.file).absolute() if keep else write_team_file(args.file, providers, force=args.force,
                                                                    schema=args.schema)
    schema = write_schema(path) if args.schema else None
    agents = roster(providers)
    if args.json:
        result: dict[str, object] = {"path": str(path), "agents": [{"name": n, "provider": p} for n, p in agents]}
        if schema is not None:
            result |= {"schema": str(schema), "written": not keep}
        out(dump(result))
        return EXIT_OK
    if schema is not None:
        out(f"wrote {schema}")
    if keep:
        out(f"kept {path}; for completion in editors its first line should be `#:schema ./{SCHEMA_NAME}`")
    else:
        team = ", ".join(f"{n} ({p})" for n, p in agents)
        out(f"wrote {path}: {team}; edit it, then `wardian up`")
    return EXIT_OK
