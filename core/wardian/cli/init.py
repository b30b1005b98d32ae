"""`wardian init [FILE]`: write a commented team file with a lead and a worker (`wardian.team.init` writes it;
docs/guide/team-file.md). `wardian.cli.team` adds the command's parser and names its handler here."""

from __future__ import annotations

import argparse
from pathlib import Path

from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.team.init import SCHEMA_NAME, parse_providers, roster, schema_path, write_schema, write_team_file


def cmd_init(args: argparse.Namespace) -> int:
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
