"""`wardian init|up|down|status`: the team file's commands (`wardian.toml`, docs/guide/team-file.md), their parsers.

Their handlers are named by where they are, `wardian.cli.init` (writing a team file) and `wardian.cli.up` (making
the home's team what it says), each imported only when its command runs: the team file's package, its checks and
the threads that carry a file out are no other command's, nor the whole parser's that `--help` builds."""

from __future__ import annotations

from wardian.cli.common import Commands

DEFAULT_FILE = "wardian.toml"  # wardian.team.DEFAULT_FILE, without importing the package for every parser
FILE_HELP = "the team file (default: ./wardian.toml)"


def register(commands: Commands) -> None:
    _init(commands)
    _up(commands)


def _up(commands: Commands) -> None:
    up = "start the team of a team file: the app, then every agent as the file says"
    p = commands.single("up", "wardian.cli.up:cmd_up", up, description=(
        f"{up}. Agents already running as the file says are left alone; one whose start differs is restarted "
        "(the output names the fields); the home's agents the file does not name are listed, never removed "
        "without --prune."))
    p.add_argument("-f", "--file", default=None, metavar="FILE", help=FILE_HELP)
    p.add_argument("--prune", action="store_true",
                   help="remove the home's agents the file does not name (as `wardian agent remove` does)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each agent's conversation")
    down = "stop the team file's agents, and the app if `wardian up` started it"
    p = commands.single("down", "wardian.cli.up:cmd_down", down, description=down)
    p.add_argument("-f", "--file", default=None, metavar="FILE", help=FILE_HELP)
    p.add_argument("--remove-worktree", dest="remove_worktree", action="store_true",
                   help="also remove the agents' git worktrees that are clean (one with changes is kept, its files "
                   "listed), and each branch wardian made whose commits its base holds; `up` makes them again")
    status = "the team at a glance: each agent's status, credential, pending and in-flight tasks"
    p = commands.single("status", "wardian.cli.up:cmd_status", status, description=(
        f"{status}, and the home's agents the file does not name; exit 3 when the app is not running."))
    p.add_argument("-f", "--file", default=None, metavar="FILE", help=FILE_HELP)


def _init(commands: Commands) -> None:
    p = commands.single("init", "wardian.cli.init:cmd_init",
                        "write a commented team file (wardian.toml) with a lead and a worker",
                        description="Write a commented team file: a lead and a worker of the chosen providers, "
                        "every key explained. Edit it, then `wardian up`.")
    p.add_argument("file", nargs="?", default=DEFAULT_FILE, metavar="FILE",
                   help=f"the file to write (default: ./{DEFAULT_FILE})")
    p.add_argument("--providers", default=None, metavar="P[,P...]",
                   help="the lead's provider, then one worker's per further one (codex, opencode, claude, qwen, "
                   "gemini, pi, acp); one provider: a lead and a worker of it (default: codex)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument("--schema", action="store_true",
                   help="also write the team file's JSON Schema beside it (wardian.schema.json) for editors, and point "
                   "a new file's first line at it; an existing team file is kept and only the schema is brought up to "
                   "date")
