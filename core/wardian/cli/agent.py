"""`wardian agent ...`: add, list, start, attach, stop, remove and revoke managed agents, and print a caller's
environment."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from wardian.cli.common import Commands, client
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import ENV_SESSION

NAME_HELP = "agent name or UUID"
AUTH_HELP = ("the credential its starts use (`wardian auth login ... --name NAME`; see `wardian auth status`); "
             "default: the provider's default credential")


def register(commands: Commands) -> None:
    agent = commands.group("agent", "manage agents")
    p = commands.add(agent, "add", cmd_agent_add, "register a managed agent")
    p.add_argument("name")
    p.add_argument("--provider", required=True,
                   help="the agent's provider (codex, opencode, claude, qwen, gemini, pi or acp)")
    p.add_argument("--command", default=None, metavar='"CMD ARGS..."',
                   help="for --provider acp: the command line that starts the agent speaking ACP on stdio "
                   "(\"opencode acp\"), split like a shell would; its first word on PATH or an absolute path")
    p.add_argument("--workspace", default=None,
                   help="the agent's workspace directory (with --worktree: the repository)")
    p.add_argument("--worktree", nargs="?", const="", default=None, metavar="BRANCH",
                   help="work in a git worktree of the repository (--workspace, default: the current directory) "
                   "made under the home, on BRANCH (default: wardian/NAME; made from the repository's current commit "
                   "when it does not exist)")
    p.add_argument("--auth", default=None, metavar="NAME", help=AUTH_HELP)
    commands.add(agent, "list", cmd_agent_list, "list agents (name, UUID, provider, status)")
    _start_parser(commands.add(
        agent, "start", cmd_agent_start,
        "start the agent's provider runtime (Codex app-server, opencode serve, claude -p) and its conversation"))
    p = commands.add(agent, "attach", cmd_agent_attach,
                     "open the agent's Codex TUI here, attached to the app-owned app-server (mode attached)")
    p.add_argument("name", help=NAME_HELP)
    p.add_argument("codex_args", nargs=argparse.REMAINDER, help="extra arguments for codex (after --)")
    p = commands.add(agent, "stop", cmd_agent_stop,
                     "stop the agent's provider runtime; new tasks wait for an explicit start")
    p.add_argument("name", help=NAME_HELP)
    p = commands.add(agent, "env", cmd_agent_env, "print shell exports of WARDIAN_HOME and a new WARDIAN_SESSION_ID")
    p.add_argument("name", help=NAME_HELP)
    p = commands.add(agent, "remove", cmd_agent_remove,
                     "remove an agent: stop it, revoke its sessions, answer its open tasks; its records stay")
    p.add_argument("name", help=NAME_HELP)
    p.add_argument("--remove-worktree", dest="remove_worktree", action="store_true",
                   help="remove its git worktree too, when clean (a worktree with changes refuses the whole removal), "
                   "and its branch when wardian made it and the base holds every commit of it; without it both stay")
    p = commands.add(agent, "revoke", cmd_agent_revoke, "revoke the sessions `wardian agent env` minted for an agent")
    p.add_argument("name", help=NAME_HELP)
    p.add_argument("--all", action="store_true", help="revoke its managed sessions too (its running MCP servers)")


def _start_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help=NAME_HELP)
    p.add_argument("--mode", choices=("background", "attached"), default=None,
                   help="default: the mode of the agent's last start, else background")
    p.add_argument("-c", "--config", action="append", default=None, metavar="KEY=VALUE",
                   help="a launch setting: for Codex exactly as `codex -c` takes it (TOML value, else a string); for "
                   "OpenCode a key of the agent's opencode.json, for Claude Code a key of its settings.json (dotted "
                   "path, TOML or JSON value); repeatable. Given, they replace the agent's saved "
                   "settings; left out, the saved ones are used")
    p.add_argument("--env", action="append", default=None, metavar="NAME=VALUE",
                   help="a variable of the provider process's environment (OPENAI_BASE_URL, OPENCODE_CONFIG_CONTENT, "
                   "...); repeatable, kept like -c. Credentials (*_API_KEY, *_TOKEN, *_SECRET, *PASSWORD*) are "
                   "refused: store them with `wardian auth login`")
    p.add_argument("--reset-settings", dest="reset_settings", action="store_true",
                   help="forget the agent's saved -c and --env settings and start without any")
    p.add_argument("--approve-tools", dest="approve_tools", default=None, metavar="TOOL,...",
                   help="grant these wardian tools: Codex gets approval_mode = \"approve\" in the agent's private "
                   "home, Claude Code runs them without asking")
    p.add_argument("--auth", default=None, metavar="NAME",
                   help=AUTH_HELP + "; kept for later starts (`--auth default` goes back to the default)")
    p.add_argument("--approvals", choices=("person", "lead", "deny"), default=None,
                   help="who answers the agent's permission requests: a person (`wardian approval`), the lead that "
                   "sent its task, or nobody (deny, the first default); kept for later starts")
    p.add_argument("--approval-timeout", dest="approval_timeout", type=float, default=None, metavar="SECONDS",
                   help="how long an approval waits for its answer before it is denied (first default 600); kept")
    p.add_argument("--allow", action="append", default=None, metavar="RULE",
                   help="an allow rule as Claude Code writes them (`Bash(git status:*)`, `shell(ls *)`, `edit`): a "
                   "request it matches is allowed without asking; repeatable, kept like -c (docs/guide/approvals.md)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the conversation")


def cmd_agent_add(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"name": args.name, "provider": args.provider}
    if args.worktree is not None:
        params["worktree"] = {"repo": os.path.abspath(args.workspace or "."),
                              **({"branch": args.worktree} if args.worktree else {})}
    elif args.workspace is not None:
        params["workspace"] = os.path.abspath(args.workspace)
    if args.auth is not None:
        params["auth"] = args.auth
    if args.command is not None:
        params["command"] = shlex.split(args.command)
    with client(args) as app:
        agent = app.call("agent/add", params)
    out(dump(agent) if args.json else f"added {agent['name']} ({agent['uuid']}, {agent['provider']})"
        + (f" working in the worktree {agent['workspace']}" if args.worktree is not None else ""))
    return EXIT_OK


def cmd_agent_list(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {}
    if os.environ.get(ENV_SESSION):
        params["session"] = os.environ[ENV_SESSION]
    with client(args) as app:
        result = app.call("agent/list", params)
    if args.json:
        out(dump(result))
        return EXIT_OK
    rows = [("NAME", "UUID", "PROVIDER", "HOST", "STATUS")]
    managed = result.get("managed") or {}
    rows += [_agent_row(a, result.get("deliveries", {}), result.get("hosts", {}), managed.get(a["uuid"]))
             for a in result["agents"]]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        out("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return EXIT_OK


def _agent_row(a: dict[str, Any], doubts: dict[str, Any], hosts: dict[str, Any],
               managed: dict[str, Any] | None) -> tuple[str, str, str, str, str]:
    host = a.get("host") or "-"
    if a.get("host") and not hosts.get(a["host"], {}).get("live", True):
        host += " (offline)"
    status = a["status"] + (f" (turn {a['active_turn_id']})" if a.get("active_turn_id") else "")
    if (d := doubts.get(a["uuid"])) is not None:
        said = [f"{d['uncertain']} uncertain" if d["uncertain"] else "",
                f"{d['confirmed_by_lookup']} confirmed by lookup" if d["confirmed_by_lookup"] else ""]
        status += "; deliveries: " + ", ".join(x for x in said if x)
    provider = a["provider"]
    if managed and managed.get("command"):
        provider += f" ({shlex.join(managed['command'])})"
    return (a["name"], a["uuid"], provider, host, status)


def cmd_agent_start(args: argparse.Namespace) -> int:
    # The tool table's dataclasses (dataclasses, inspect; ~5 ms): `agent start`'s, not `agent list`'s or `env`'s.
    from wardian.protocol.tools import parse_tool_names

    params: dict[str, Any] = {"agent": args.name, "approve_tools": list(parse_tool_names(args.approve_tools))}
    if args.mode is not None:
        params["mode"] = args.mode
    if args.config is not None:
        params["config"] = list(args.config)
    if args.env is not None:
        params["env"] = list(args.env)
    if args.reset_settings:
        params["reset_settings"] = True
    if args.auth is not None:
        params["auth"] = args.auth
    if args.approvals is not None:
        params["approvals"] = args.approvals
    if args.approval_timeout is not None:
        params["approval_timeout_ms"] = round(args.approval_timeout * 1000)
    if args.allow is not None:
        params["allow"] = list(args.allow)
    with client(args) as app:
        # Codex may index a long history before the conversation is ready: no short deadline here.
        result = app.call("agent/start", params, timeout_s=args.timeout)
    if args.json:
        out(dump(result))
    else:
        agent = result["agent"]
        out(f"started {agent['name']} ({agent['status']}, {agent['provider']} {result['provider_version']}, "
            f"thread {result['thread_id']}, generation {result['generation']})")
    for warning in result.get("warnings", ()):
        sys.stderr.write(f"wardian: warning: {warning}\n")
    return EXIT_OK


def cmd_agent_attach(args: argparse.Namespace) -> int:
    """Run the agent's Codex TUI in this terminal, attached to the app-owned app-server."""
    from wardian.terminal import run_attached_tui  # psutil and the terminal's stack (~11 ms): `agent attach` alone

    with client(args) as app:
        info = app.call("agent/attach", {"agent": args.name})
    return run_attached_tui(info, extra_args=list(args.codex_args))


def cmd_agent_stop(args: argparse.Namespace) -> int:
    with client(args) as app:
        result = app.call("agent/stop", {"agent": args.name}, timeout_s=60)
    if args.json:
        out(dump(result))
    else:
        out(f"stopped {result['agent']['name']}" if result["stopped"] else
            f"{result['agent']['name']} was not running; it stays off")
    return EXIT_OK


def cmd_agent_remove(args: argparse.Namespace) -> int:
    with client(args) as app:
        result = app.call("agent/remove", {"agent": args.name, "remove_worktree": args.remove_worktree},
                          timeout_s=120)
    if args.json:
        out(dump(result))
        return EXIT_OK
    agent = result["agent"]
    out(f"removed {agent['name']} ({agent['uuid']}); its records stay as evidence")
    if result.get("worktree"):
        out("  " + worktree_removal_line(result["worktree"]))
    if result["answered"]:
        out(f"  {len(result['answered'])} open tasks answered with a failed notice: {', '.join(result['answered'])}")
    if result["uncertain"]:
        out(f"  {len(result['uncertain'])} tasks in a turn nobody saw end are uncertain (do not resend blindly): "
            f"{', '.join(result['uncertain'])}")
    return EXIT_OK


def worktree_removal_line(w: dict[str, Any]) -> str:
    """What became of a worktree `--remove-worktree` asked to remove, for a person."""
    done = f"worktree {w['path']} removed" if w["removed"] else f"worktree {w['path']} kept"
    branch = f"branch {w['branch']} deleted" if w["branch_deleted"] else ""
    return "; ".join(x for x in (done, branch, w.get("note") or "") if x)


def cmd_agent_revoke(args: argparse.Namespace) -> int:
    with client(args) as app:
        result = app.call("agent/revoke", {"agent": args.name, "all": args.all})
    if args.json:
        out(dump(result))
    else:
        which = "sessions" if args.all else "operator-minted sessions (`wardian agent env`)"
        out(f"revoked {result['revoked']} {which} of {result['agent']['name']}")
    return EXIT_OK


def cmd_agent_env(args: argparse.Namespace) -> int:
    with client(args) as app:
        result = app.call("agent/session", {"agent": args.name})
    if args.json:
        out(dump({"WARDIAN_HOME": result["home"], "WARDIAN_SESSION_ID": result["session_id"]}))
    else:
        out(f"export WARDIAN_HOME={shlex.quote(result['home'])}")
        out(f"export WARDIAN_SESSION_ID={shlex.quote(result['session_id'])}")
    return EXIT_OK
