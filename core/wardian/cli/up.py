"""`wardian up|down|status [-f FILE]`: make the home's team what its team file says, take it down, show it
(docs/guide/team-file.md). The file is read and checked whole first; a broken one changes nothing.

`wardian.cli.team` adds these commands' parsers and names their handlers here, so this module, and what it imports,
loads only when one of them runs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wardian.cli.exits import EXIT_APP, EXIT_OK, exit_code_for
from wardian.cli.output import dump, out
from wardian.cli.records import agent_tokens_text, approval_line
from wardian.cli.team_run import (
    Outcome,
    app_status,
    apply_policy,
    ensure_app,
    overview,
    remove_agents,
    remove_worktrees,
    run_steps,
    stop_agents,
    stop_app,
)
from wardian.cli.team_show import policy_line, progress, table, worktree_line
from wardian.home import Home
from wardian.team import DEFAULT_FILE, Team, load_team
from wardian.team.plan import plan_team
from wardian.team.state import read_state, write_state


def _load(args: argparse.Namespace) -> Team:
    """The team file, checked whole.

    Raises:
        TeamFileError: every problem of a broken file (exit 2), before anything is started or changed.
    """
    environ = dict(os.environ)
    if args.home is not None:
        environ["WARDIAN_HOME"] = args.home
    return load_team(Path(args.file or DEFAULT_FILE), environ=environ)


def cmd_up(args: argparse.Namespace) -> int:
    team = _load(args)
    home = Home(team.home)
    state = read_state(home.root)
    mark = ensure_app(home, team.console, team.notify)
    if mark is not None:
        state.app = mark
        write_state(home.root, state)
        (sys.stderr if args.json else sys.stdout).write(f"app started for {home.root} (pid {mark.pid})\n")
    elif team.console is not None:
        _console_note(home, team.console)
    apply_policy(home, team.policy)
    rows = overview(home)
    steps, extras = plan_team(team, rows)
    names = [s.agent.name for s in steps] + ([r["agent"]["name"] for r in extras] if args.prune else [])
    show = progress(names, sys.stderr if args.json else sys.stdout)
    outcomes = run_steps(home, steps, {r["agent"]["name"]: r for r in rows}, show.show, args.timeout)
    pruned = remove_agents(home, extras, show.show) if args.prune else []
    show.close()
    if args.json:
        out(dump({"file": str(team.path), "home": str(home.root), "app_started": mark is not None,
                  "agents": [o.to_data() for o in outcomes],
                  "not_in_file": [] if args.prune else [_row_data(r) for r in extras],
                  "pruned": [o.to_data() for o in pruned]}))
    else:
        _print_up(team, outcomes, [] if args.prune else extras, pruned)
    return _exit_of([*outcomes, *pruned])


def _console_note(home: Home, console: str) -> None:
    """The file asks for a web console, and the app that runs already was started without one: say so (a running
    app's console cannot be added)."""
    status = app_status(home)
    if status is not None and not status.get("console"):
        sys.stderr.write(f"wardian: warning: the running app serves no web console, and the team file asks for one at "
                         f"{console}: stop the app (`wardian down`, or `wardian app stop`) and run `wardian up` "
                         "again to serve it\n")


def _exit_of(outcomes: Sequence[Outcome]) -> int:
    """The exit code of the first agent that failed (in the file's order), else 0."""
    for o in outcomes:
        if o.error is not None:
            return exit_code_for(o.error)
    return EXIT_OK


def _print_up(team: Team, outcomes: Sequence[Outcome], extras: Sequence[Mapping[str, Any]],
              pruned: Sequence[Outcome]) -> None:
    rows = [("NAME", "PROVIDER", "STATUS", "CONVERSATION", "UP")]
    rows += [(o.name, o.provider, o.status, o.thread_id or "-", o.action) for o in outcomes]
    rows += [(r["agent"]["name"], r["agent"]["provider"], r["agent"]["status"],
              (r.get("managed") or {}).get("thread_id") or "-", f"not in {team.path.name}") for r in extras]
    rows += [(o.name, o.provider, "-", "-", o.action) for o in pruned]
    out("")
    table(rows)
    for o in outcomes:
        if o.action == "restarted":
            out(f"restarted {o.name}: {'; '.join(o.reasons)} changed")
        for warning in o.warnings:
            sys.stderr.write(f"wardian: warning: {o.name}: {warning}\n")
    if extras:
        out(f"{len(extras)} agent(s) of the home not in {team.path.name}: "
            f"{', '.join(r['agent']['name'] for r in extras)} (kept; `wardian up --prune` removes them)")
    for o in [*outcomes, *pruned]:
        if o.error is not None:
            allowed = f" (allowed: {o.error.allowed})" if o.error.allowed else ""
            sys.stderr.write(f"wardian: {o.name}: {o.error.code}: {o.error.message}{allowed}\n")


def _row_data(row: Mapping[str, Any]) -> dict[str, Any]:
    """An agent of the home as `up --json` and `status --json` show it."""
    agent, managed = row["agent"], row.get("managed") or {}
    return {"name": agent["name"], "provider": agent["provider"], "uuid": agent["uuid"], "status": agent["status"],
            "generation": agent["generation"], "workspace": agent["workspace"], "auth": managed.get("auth"),
            "thread_id": managed.get("thread_id"), "pending": row.get("pending", 0),
            "in_flight": row.get("in_flight", 0), "approvals": row.get("approvals"), "usage": row.get("usage"),
            "worktree": row.get("worktree")}


def cmd_down(args: argparse.Namespace) -> int:
    team = _load(args)
    home = Home(team.home)
    state = read_state(home.root)
    if app_status(home) is None:
        if state.app is not None and home.root.exists():
            state.app = None
            write_state(home.root, state)
        if args.json:
            out(dump({"file": str(team.path), "home": str(home.root), "agents": [], "app_stopped": False}))
        else:
            out(f"app not running for {home.root}: nothing to stop")
        return EXIT_OK
    rows = {r["agent"]["name"]: r for r in overview(home)}
    show = progress([a.name for a in team.agents], sys.stderr if args.json else sys.stdout)
    outcomes = stop_agents(home, team, rows, show.show)
    trees = remove_worktrees(home, team, rows, show.show) if args.remove_worktree else []
    show.close()
    stopped = stop_app(home, state.app)
    if stopped is not None:
        state.app = None
        write_state(home.root, state)
    if args.json:
        out(dump({"file": str(team.path), "home": str(home.root), "agents": [o.to_data() for o in outcomes],
                  "worktrees": [o.to_data() for o in trees], "app_stopped": stopped is not None}))
    elif stopped is not None:
        out(f"app stopped (pid {stopped['pid']}): nothing of the team is left running")
    else:
        out(f"the app keeps running for {home.root}: `wardian up` did not start it (`wardian app stop` stops it)")
    for o in trees:
        if o.error is not None:
            sys.stderr.write(f"wardian: {o.name}: {o.error.code}: {o.error.message}\n")
    return _exit_of([*outcomes, *trees])


def cmd_status(args: argparse.Namespace) -> int:
    team = _load(args)
    home = Home(team.home)
    status = app_status(home)
    rows = overview(home) if status is not None else []
    by_name = {r["agent"]["name"]: r for r in rows}
    named = {a.name for a in team.agents}
    agents = [_row_data(by_name[a.name]) if a.name in by_name else
              {"name": a.name, "provider": a.provider, "uuid": None, "status": None, "generation": None,
               "workspace": None if a.workspace is None else str(a.workspace), "auth": a.auth, "thread_id": None,
               "pending": 0, "in_flight": 0, "approvals": None, "usage": None, "worktree": None}
              for a in team.agents]
    extras = [_row_data(r) for r in rows if r["agent"]["name"] not in named]
    if args.json:
        out(dump({"file": str(team.path), "home": str(home.root), "running": status is not None, "app": status,
                  "agents": agents, "not_in_file": extras}))
    else:
        _print_status(team, home.root, status, agents, extras)
    return EXIT_OK if status is not None else EXIT_APP


def _print_status(team: Team, root: Path, status: Mapping[str, Any] | None, agents: Sequence[Mapping[str, Any]],
                  extras: Sequence[Mapping[str, Any]]) -> None:
    if status is None:
        out(f"app not running for {root} (`wardian up -f {team.path.name}` starts the team)")
    else:
        out(f"app running for {root} (pid {status['pid']}, version {status['version']})"
            + (f"; web console at {status['console']}" if status.get("console") else ""))
        out(policy_line(status["task_policy"]))
    rows = [("NAME", "PROVIDER", "STATUS", "CREDENTIAL", "PENDING", "IN-FLIGHT", "CONVERSATION", "TOKENS")]
    for a in agents:
        state = a["status"] or ("-" if status is None else "not added")
        rows.append((a["name"], a["provider"], state, a["auth"] or "default", str(a["pending"]),
                     str(a["in_flight"]), a["thread_id"] or "-", agent_tokens_text(a["usage"])))
    for a in extras:
        rows.append((a["name"], a["provider"], f"{a['status']} (not in {team.path.name})", a["auth"] or "default",
                     str(a["pending"]), str(a["in_flight"]), a["thread_id"] or "-", agent_tokens_text(a["usage"])))
    table(rows)
    for a in [*agents, *extras]:
        if a.get("approvals"):
            tally = a["approvals"]
            out(f"{a['name']}: {tally['count']} approval(s), {tally['pending']} pending (`wardian approval list`); "
                "the last:")
            out("  " + approval_line(tally["last"]))
    for a in [*agents, *extras]:
        if a.get("worktree"):
            out(f"{a['name']}: {worktree_line(a['worktree'])}")
    if any(a["status"] == "signed_out" for a in [*agents, *extras]):
        out("a signed_out agent has no usable credential: `wardian auth login`, then `wardian up`")
