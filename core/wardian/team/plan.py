"""What `wardian up` does to each agent of a team file, decided from what the app says of the home: add it, start
it, restart it (and which fields changed), leave it alone, or refuse (what cannot change in place, and the fix).

Plain data in, plain data out (stdlib only): the CLI reads `agent/overview` (which shows each agent's kept mode,
settings, credential name and tool grants), and carries the steps out through the app (docs/guide/team-file.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wardian.approvals import DEFAULT_TIMEOUT_MS, Policy
from wardian.overrides import masked_setting
from wardian.team.model import Team, TeamAgent

RUNNING = frozenset({"starting", "idle", "active"})
"""Agent statuses with a provider runtime up: `up` compares such an agent's start with the file's."""
DEFAULT_MODE = "background"


@dataclass(frozen=True, slots=True)
class Step:
    """What `up` does to one agent of the file. `action`: add (new in the home, then started), start (in the home,
    not running), restart (running with another start than the file's; `reasons` names each changed field), keep
    (running as the file says), refused (`problem` says what cannot change in place and how to fix it)."""

    agent: TeamAgent
    action: str
    reasons: tuple[str, ...] = ()
    uuid: str | None = None
    problem: str | None = None


def plan_team(team: Team, overview: Sequence[Mapping[str, Any]]) -> tuple[list[Step], list[Mapping[str, Any]]]:
    """A step per agent of the file, in its order, and the home's agents the file does not name (`agent/overview`
    rows), which `up` lists and never removes unless asked (`--prune`)."""
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for row in overview:
        by_name.setdefault(row["agent"]["name"], []).append(row)
    steps = [_twins(want, rows) if len(rows := by_name.get(want.name, [])) > 1 else
             plan_agent(team, want, rows[0] if rows else None) for want in team.agents]
    named = {a.name for a in team.agents}
    return steps, [row for row in overview if row["agent"]["name"] not in named]


def _twins(want: TeamAgent, rows: Sequence[Mapping[str, Any]]) -> Step:
    """The roster lets names repeat; the file's agent must name one of them."""
    uuids = ", ".join(r["agent"]["uuid"] for r in rows)
    return Step(want, "refused", problem=(
        f"the home has {len(rows)} agents named {want.name} ({uuids}); the file's agent must be one of them: "
        f"remove the others (`wardian agent remove UUID`) and run `wardian up` again"))


def plan_agent(team: Team, want: TeamAgent, have: Mapping[str, Any] | None) -> Step:
    """The step of one agent: `have` is its `agent/overview` row, None when the home has no such agent."""
    if have is None:
        return Step(want, "add", ("not in the home",))
    agent = have["agent"]
    problem = _fixed_fields(team, want, have)
    if problem is not None:
        return Step(want, "refused", uuid=agent["uuid"], problem=problem)
    if agent["status"] not in RUNNING or have.get("managed") is None:
        return Step(want, "start", (f"was {agent['status']}",), uuid=agent["uuid"])
    changed = changed_fields(want, have)
    return Step(want, "restart" if changed else "keep", tuple(changed), uuid=agent["uuid"])


def _fixed_fields(team: Team, want: TeamAgent, have: Mapping[str, Any]) -> str | None:
    """What the home keeps for good that differs from the file (an agent's provider, its workspace, its host):
    the problem and its fix, or None."""
    agent = have["agent"]
    fix = (f"remove it (`wardian agent remove {want.name}`; its records stay) and run `wardian up` again, or give "
           f"the file's agent another name and remove the old one with `wardian up --prune`")
    if agent["provider"] != want.provider:
        return (f"{want.name} is a {agent['provider']} agent in the home and {team.path.name} makes it "
                f"{want.provider}; an agent's provider cannot change: {fix}")
    tree = have.get("worktree")
    if want.worktree is not None or tree is not None:
        if (tree or {}).get("branch") != want.worktree:
            return (f"{want.name} works in {_tree_text(tree)} in the home and {team.path.name} says "
                    f"{'a worktree on ' + want.worktree if want.worktree else 'no worktree'}; an agent's worktree "
                    f"cannot change: {fix}")
    elif not same_workspace(want, agent.get("workspace")):
        return (f"{want.name}'s workspace is {agent.get('workspace') or 'the default one'} in the home and "
                f"{team.path.name} says {want.workspace or 'the default one'}; an agent's workspace cannot change: "
                f"{fix}")
    if not have.get("local", True):
        return (f"{want.name} belongs to host {agent.get('host')}, whose app starts and stops it: run "
                f"`wardian up` there")
    return None


def _tree_text(tree: Mapping[str, Any] | None) -> str:
    return "no worktree" if tree is None else f"a worktree on {tree['branch']}"


def same_workspace(want: TeamAgent, have: str | None) -> bool:
    if want.workspace is None or have is None:
        return want.workspace is None and have is None
    return os.path.realpath(want.workspace) == os.path.realpath(have)


def changed_fields(want: TeamAgent, have: Mapping[str, Any]) -> list[str]:
    """Each field of a running agent's start that differs from the file's, as `field: was → now` (a setting's key
    only: the app shows secret-looking values masked, and so does this). The tool grants are the ones the app keeps
    with the agent, which its restarts grant again."""
    managed = have["managed"]
    changed: list[str] = []
    mode = want.mode or DEFAULT_MODE
    if (managed.get("mode") or DEFAULT_MODE) != mode:
        changed.append(f"mode: {managed.get('mode') or DEFAULT_MODE} → {mode}")
    if (keys := settings_diff(want.settings, managed.get("settings") or ())):
        changed.append("settings: " + ", ".join(keys))
    if managed.get("auth") != want.auth:
        changed.append(f"auth: {managed.get('auth') or 'default'} → {want.auth or 'default'}")
    if sorted(managed.get("env") or ()) != sorted(want.env):
        changed.append("env: " + ", ".join(sorted({str(e).partition("=")[0] for e in managed.get("env") or ()}
                                                  ^ {e.partition("=")[0] for e in want.env}) or ["values"]))
    given = tuple(str(t) for t in managed.get("approve_tools") or ())
    if sorted(given) != sorted(want.approve_tools):
        changed.append(f"approve_tools: {','.join(given) or 'none'} → {','.join(want.approve_tools) or 'none'}")
    policy = want.approvals or Policy.DENY.value
    if (managed.get("approvals") or Policy.DENY.value) != policy:
        changed.append(f"approvals: {managed.get('approvals') or Policy.DENY.value} → {policy}")
    timeout = want.approval_timeout_ms or DEFAULT_TIMEOUT_MS
    if (managed.get("approval_timeout_ms") or DEFAULT_TIMEOUT_MS) != timeout:
        changed.append(f"approval_timeout: {(managed.get('approval_timeout_ms') or DEFAULT_TIMEOUT_MS) // 1000}s → "
                       f"{timeout // 1000}s")
    kept = [str(r) for r in managed.get("allow") or ()]
    if kept != list(want.allow):
        changed.append(f"allow: {', '.join(kept) or 'none'} → {', '.join(want.allow) or 'none'}")
    return changed


def settings_diff(want: Sequence[str], have: Sequence[str]) -> list[str]:
    """The keys whose setting differs between the file's settings and the running start's (masked as the app shows
    them), sorted: added, removed or changed alike."""
    mine = _by_key(masked_setting(s) for s in want)
    theirs = _by_key(have)
    return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))


def _by_key(settings: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in settings:
        key, _, value = str(text).partition("=")
        out[key.strip()] = value.strip()
    return out
