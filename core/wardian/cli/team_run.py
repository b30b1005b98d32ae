"""Carrying out `wardian up` and `wardian down` through the app, as `wardian app start`, `agent add|start|stop|remove`
and `app stop` do: the same methods, the same parameters (docs/guide/team-file.md).

Agents start side by side, each in a thread of its own with its own connection: one agent's failure (not signed in,
a refused setting) is that agent's outcome, and the others still start.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wardian import errors
from wardian.approvals import DEFAULT_TIMEOUT_MS, Policy
from wardian.cli.app import start_in_background, stop_and_wait
from wardian.client import AppClient
from wardian.console.address import parse_console_address
from wardian.home import Home
from wardian.home_setup import inspect_home
from wardian.taskpolicy import TaskPolicy
from wardian.team.state import AppMark

if TYPE_CHECKING:
    from wardian.team.model import Team, TeamAgent
    from wardian.team.plan import Step

Show = Callable[[str, str], None]
"""Progress of one agent: its name and what happens to it now."""
APP_START_TIMEOUT_S = 60.0


@dataclass(slots=True)
class Outcome:
    """What became of one agent. `action`: added, started, restarted, unchanged, refused, failed, removed."""

    name: str
    provider: str
    action: str
    reasons: tuple[str, ...] = ()
    uuid: str | None = None
    status: str = "-"
    generation: int | None = None
    thread_id: str | None = None
    error: errors.WardianError | None = None
    warnings: tuple[str, ...] = ()

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "provider": self.provider, "action": self.action, "changed": list(self.reasons),
                "uuid": self.uuid, "status": self.status, "generation": self.generation,
                "thread_id": self.thread_id, "warnings": list(self.warnings),
                "error": None if self.error is None else self.error.to_data()}


def overview(home: Home) -> list[dict[str, Any]]:
    with AppClient(home) as app:
        return list(app.call("agent/overview")["agents"])


def apply_policy(home: Home, policy: TaskPolicy) -> None:
    """Give the app the team file's task deadline and loop-guard limits, whole (a key the file leaves out is its
    default), for the tasks admitted from now on."""
    with AppClient(home) as app:
        app.call("team/policy", {"task_deadline_ms": policy.task_deadline_ms, "max_task_depth": policy.max_task_depth,
                                 "max_chain_tasks": policy.max_chain_tasks})


def app_status(home: Home) -> dict[str, Any] | None:
    """The running app's `app/status`; None when no app runs for the home."""
    with AppClient(home) as app:
        try:
            return dict(app.call("app/status"))
        except errors.AppNotRunning:
            return None


def ensure_app(home: Home, console: str | None, notify: Sequence[str] | None = None) -> AppMark | None:
    """Start the home's app in the background unless one runs (as `wardian app start` does; it outlives this
    command), with the team's console and notify command; the mark of the app started, None when one ran already."""
    extra: list[str] = []
    if console is not None:
        parse_console_address(console)
        extra = ["--console", console]
    if notify is not None:
        extra += ["--notify-command", shlex.join(notify)]  # split back into exactly this list by the app
    inspect_home(home)  # a folder that is not a wardian home is refused as such, before its socket is looked at
    if app_status(home) is not None:
        return None
    start_in_background(home, extra, APP_START_TIMEOUT_S)
    status = app_status(home)
    if status is None:
        raise errors.InternalError(f"the app started for {home.root} but does not answer; see {home.app_out_path}")
    return AppMark(int(status["pid"]), int(status["started_at"]))


def start_params(want: TeamAgent, uuid: str | None = None) -> dict[str, Any]:
    """`agent/start`'s parameters for the file's agent (by its UUID when known: names may repeat in a home):
    everything given, so the saved start is the file's."""
    return {"agent": uuid or want.name, "mode": want.mode or "background", "config": list(want.settings),
            "approve_tools": list(want.approve_tools), "auth": want.auth or "default", "env": list(want.env),
            "approvals": want.approvals or Policy.DENY.value,
            "approval_timeout_ms": want.approval_timeout_ms or DEFAULT_TIMEOUT_MS, "allow": list(want.allow)}


def add_params(want: TeamAgent) -> dict[str, Any]:
    params: dict[str, Any] = {"name": want.name, "provider": want.provider}
    if want.worktree is not None and want.workspace is not None:
        params["worktree"] = {"repo": os.path.abspath(want.workspace), "branch": want.worktree}
    elif want.workspace is not None:
        params["workspace"] = os.path.abspath(want.workspace)
    if want.auth is not None:
        params["auth"] = want.auth
    if want.command:
        params["command"] = list(want.command)
    return params


def run_step(home: Home, step: Step, row: Mapping[str, Any] | None, show: Show,
             timeout_s: float) -> Outcome:
    """Carry out one agent's step; an error of the app's is the agent's outcome, never raised."""
    want = step.agent
    outcome = Outcome(want.name, want.provider, step.action, step.reasons, step.uuid)
    if row is not None:
        outcome.status, outcome.generation = row["agent"]["status"], row["agent"]["generation"]
        outcome.thread_id = (row.get("managed") or {}).get("thread_id")
    if step.action == "refused":
        outcome.error = errors.InvalidArguments(step.problem or "refused", field=f"agents.{want.name}")
        show(want.name, f"refused: {step.problem}")
        return outcome
    if step.action == "keep":
        outcome.action = "unchanged"
        show(want.name, f"running as the file says ({outcome.status}, generation {outcome.generation})")
        return outcome
    try:
        with AppClient(home) as app:
            if step.action == "add":
                show(want.name, "adding")
                outcome.uuid = app.call("agent/add", add_params(want))["uuid"]
            why = f" ({'; '.join(step.reasons)})" if step.action == "restart" else ""
            show(want.name, ("restarting" if step.action == "restart" else "starting") + why)
            started = app.call("agent/start", start_params(want, outcome.uuid), timeout_s=timeout_s)
    except errors.WardianError as exc:
        outcome.action, outcome.error = "failed", exc
        show(want.name, f"failed: {exc.code}: {exc.message}")
        return outcome
    outcome.action = {"add": "added", "start": "started", "restart": "restarted"}[step.action]
    outcome.status, outcome.generation = started["agent"]["status"], started["generation"]
    outcome.thread_id, outcome.warnings = started["thread_id"], tuple(started.get("warnings", ()))
    outcome.uuid = started["agent"]["uuid"]
    show(want.name, f"{outcome.action} ({outcome.status}, generation {outcome.generation})"
         + (f": {'; '.join(step.reasons)}" if step.action == "restart" else ""))
    return outcome


def run_steps(home: Home, steps: Sequence[Step], rows: Mapping[str, Mapping[str, Any]], show: Show,
              timeout_s: float) -> list[Outcome]:
    """Every step side by side; the outcomes in the file's order."""
    if not steps:
        return []
    with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="wardian-up") as pool:
        futures = [pool.submit(run_step, home, s, rows.get(s.agent.name), show, timeout_s) for s in steps]
        return [f.result() for f in futures]


def remove_agents(home: Home, extras: Sequence[Mapping[str, Any]], show: Show) -> list[Outcome]:
    """`agent remove` of each agent the file does not name (`up --prune`)."""
    outcomes: list[Outcome] = []
    for row in extras:
        agent = row["agent"]
        outcome = Outcome(agent["name"], agent["provider"], "removed", uuid=agent["uuid"], status=agent["status"])
        show(agent["name"], "removing (not in the file)")
        try:
            with AppClient(home) as app:
                app.call("agent/remove", {"agent": agent["uuid"]}, timeout_s=120)
        except errors.WardianError as exc:
            outcome.action, outcome.error = "failed", exc
            show(agent["name"], f"failed: {exc.code}: {exc.message}")
        else:
            show(agent["name"], "removed; its records stay as evidence")
        outcomes.append(outcome)
    return outcomes


def stop_agents(home: Home, team: Team, rows: Mapping[str, Mapping[str, Any]], show: Show) -> list[Outcome]:
    """`agent stop` of each of the file's agents the home has (they stay off until started again)."""
    outcomes: list[Outcome] = []
    for want in team.agents:
        row = rows.get(want.name)
        outcome = Outcome(want.name, want.provider, "absent")
        if row is None:
            show(want.name, "not in the home")
            outcomes.append(outcome)
            continue
        try:
            with AppClient(home) as app:
                result = app.call("agent/stop", {"agent": row["agent"]["uuid"]}, timeout_s=60)
        except errors.WardianError as exc:
            outcome.action, outcome.error = "failed", exc
            show(want.name, f"failed: {exc.code}: {exc.message}")
        else:
            outcome.action = "stopped" if result["stopped"] else "off"
            outcome.uuid, outcome.status = result["agent"]["uuid"], result["agent"]["status"]
            show(want.name, "stopped" if result["stopped"] else "was not running; it stays off")
        outcomes.append(outcome)
    return outcomes


def remove_worktrees(home: Home, team: Team, rows: Mapping[str, Mapping[str, Any]], show: Show) -> list[Outcome]:
    """`worktree/remove` of each of the file's agents that has a worktree (`down --remove-worktree`): a clean one is
    removed, one with changes is that agent's refusal (its files listed), and kept."""
    outcomes: list[Outcome] = []
    for want in team.agents:
        row = rows.get(want.name)
        if row is None or not row.get("worktree"):
            continue
        outcome = Outcome(want.name, want.provider, "worktree removed", uuid=row["agent"]["uuid"])
        try:
            with AppClient(home) as app:
                done = app.call("worktree/remove", {"agent": row["agent"]["uuid"]}, timeout_s=120)["worktree"]
        except errors.WardianError as exc:
            outcome.action, outcome.error = "worktree kept", exc
            show(want.name, f"worktree kept: {exc.code}: {exc.message}")
        else:
            outcome.reasons = (done["note"],) if done["note"] else ()
            show(want.name, f"worktree {done['path']} removed" + (f"; {done['note']}" if done["note"] else ""))
        outcomes.append(outcome)
    return outcomes


def stop_app(home: Home, mark: AppMark | None, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """Stop the app when it is the one `up` started (same pid, same start), and wait until it has exited; its
    `app/status` when stopped, None when it was left alone (another app, or none)."""
    status = app_status(home)
    if status is None or mark is None or (status["pid"], status["started_at"]) != (mark.pid, mark.started_at):
        return None
    with AppClient(home) as app:
        stop_and_wait(app, status["pid"], timeout_s)
    return status
