"""What `wardian up` decides for each agent from what the app shows (`wardian.team.plan`), what it remembers in the
home (`wardian.team.state`), and how its progress prints (`wardian.cli.team_show`)."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from wardian.cli.team_show import LiveLines, PlainLines, progress
from wardian.team.model import Team, TeamAgent
from wardian.team.plan import plan_agent, plan_team, settings_diff
from wardian.team.state import AppMark, TeamState, read_state, state_path, write_state

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

WS = Path("/tmp")


def agent(name: str = "lead", *, provider: str = "codex", workspace: Path | None = WS, mode: str | None = None,
          tools: tuple[str, ...] = (), auth: str | None = None, settings: tuple[str, ...] = ('model="m"',)
          ) -> TeamAgent:
    return TeamAgent(name=name, provider=provider, workspace=workspace, mode=mode, approve_tools=tools, auth=auth,
                     settings=settings, line=3)


def team(*agents: TeamAgent) -> Team:
    return Team(path=Path("/tmp/wardian.toml"), home=Path("/tmp/h"), console=None, agents=agents)


def row(name: str = "lead", *, provider: str = "codex", status: str = "idle", generation: int = 2,
        workspace: str | None = "/tmp", mode: str | None = "background", settings: tuple[str, ...] = ('model="m"',),
        auth: str | None = None, local: bool = True, managed: bool = True, tools: tuple[str, ...] = ()
        ) -> dict[str, Any]:
    return {"agent": {"name": name, "uuid": f"u-{name}", "provider": provider, "status": status,
                      "generation": generation, "workspace": workspace, "host": "h", "active_turn_id": None,
                      "created_at": 1},
            "pending": 0, "in_flight": 0, "host_live": True, "local": local,
            "managed": {"mode": mode, "settings": list(settings), "thread_id": "t1", "auth": auth,
                        "previous_thread_id": None, "thread_replaced_at": None, "thread_replaced_reason": None,
                        "approve_tools": list(tools)}
            if managed else None}


def test_a_new_agent_is_added_and_a_stopped_one_started() -> None:
    t = team(agent("lead"), agent("worker"))
    steps, extras = plan_team(t, [row("worker", status="off")])
    assert [(s.agent.name, s.action) for s in steps] == [("lead", "add"), ("worker", "start")]
    assert steps[1].reasons == ("was off",)
    assert steps[1].uuid == "u-worker"
    assert extras == []


def test_an_unchanged_running_agent_is_kept_and_the_home_s_others_are_listed() -> None:
    steps, extras = plan_team(team(agent()), [row(), row("old")])
    assert [s.action for s in steps] == ["keep"]
    assert [e["agent"]["name"] for e in extras] == ["old"]


@pytest.mark.parametrize(("want", "have", "reason"), [
    (agent(mode="attached"), row(), "mode: background → attached"),
    (agent(settings=('model="n"',)), row(), "settings: model"),
    (agent(settings=('model="m"', "x=1")), row(), "settings: x"),
    (agent(settings=()), row(), "settings: model"),
    (agent(auth="work"), row(), "auth: default → work"),
    (agent(), row(auth="work"), "auth: work → default"),
])
def test_a_changed_field_restarts_the_agent_and_is_named(want: TeamAgent, have: dict[str, Any], reason: str) -> None:
    step = plan_agent(team(want), want, have)
    assert (step.action, step.reasons) == ("restart", (reason,))


def test_grants_are_compared_with_those_the_app_keeps_with_the_agent() -> None:
    want = agent(tools=("followup_task", "reply_task"))
    same = plan_agent(team(want), want, row(tools=("reply_task", "followup_task")))
    assert same.action == "keep"
    fewer = plan_agent(team(want), want, row(tools=("reply_task",)))
    assert fewer.reasons == ("approve_tools: reply_task → followup_task,reply_task",)
    # A later generation (the app restarted the agent itself) keeps the grants: nothing to restart for.
    assert plan_agent(team(want), want, row(generation=7, tools=want.approve_tools)).action == "keep"
    none_wanted = agent()
    assert plan_agent(team(none_wanted), none_wanted, row(tools=("reply_task",))).reasons == (
        "approve_tools: reply_task → none",)


def test_secret_looking_settings_compare_masked_as_the_app_shows_them() -> None:
    want = agent(settings=('env.ANTHROPIC_API_KEY="sk-1"', 'model="m"'))
    have = row(settings=("env.ANTHROPIC_API_KEY=********", 'model="m"'))
    assert plan_agent(team(want), want, have).action == "keep"
    assert settings_diff(['a="1"', 'b="2"'], ['b="2"', 'a="1"']) == []


@pytest.mark.parametrize(("have", "words"), [
    (row(provider="opencode"), ("opencode agent in the home", "provider cannot change",
                                "wardian agent remove lead", "--prune")),
    (row(workspace="/var"), ("workspace is /var", "workspace cannot change", "wardian agent remove lead")),
    (row(workspace=None), ("the default one", "workspace cannot change")),
    (row(local=False), ("belongs to host h", "run `wardian up` there")),
])
def test_what_cannot_change_in_place_is_refused_with_the_fix(have: dict[str, Any], words: tuple[str, ...]) -> None:
    want = agent()
    step = plan_agent(team(want), want, have)
    assert step.action == "refused"
    assert step.problem is not None
    assert all(w in step.problem for w in words), step.problem


def test_a_workspace_is_compared_by_its_real_path(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    want = agent(workspace=tmp_path / "link")
    step = plan_agent(team(want), want, row(workspace=str(tmp_path / "real")))
    assert step.action == "keep"


def test_an_agent_no_app_started_is_started() -> None:
    want = agent()
    assert plan_agent(team(want), want, row(status="off", managed=False)).action == "start"
    assert plan_agent(team(want), want, row(status="signed_out")).reasons == ("was signed_out",)


def test_the_state_survives_a_round_trip_private_and_a_broken_file_is_empty(tmp_path: Path) -> None:
    assert read_state(tmp_path) == TeamState()
    write_state(tmp_path, TeamState(AppMark(12, 34)))
    assert read_state(tmp_path) == TeamState(AppMark(12, 34))
    assert stat.S_IMODE(os.stat(state_path(tmp_path)).st_mode) == 0o600
    # An older `up` also wrote the grants it gave: ignored (the app keeps them with the agent now).
    state_path(tmp_path).write_text('{"app": null, "grants": {"u": {"generation": 1, "approve_tools": []}}}')
    assert read_state(tmp_path) == TeamState()
    for broken in ("{", "[]", '{"app": {"pid": "x"}}'):
        state_path(tmp_path).write_text(broken, encoding="utf-8")
        assert read_state(tmp_path) == TeamState()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_live_on_a_terminal_and_plain_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("LINES", "24")
    plain = io.StringIO()
    assert type(progress(["a"], plain)) is PlainLines
    tty = _Tty()
    live = progress(["lead", "worker"], tty)
    assert isinstance(live, LiveLines)
    live.show("lead", "starting")
    # Two lines drawn, then lead's (two up from the bottom) cleared and rewritten in place.
    assert tty.getvalue() == ("lead    waiting\nworker  waiting\n"
                              "\x1b[2A\r\x1b[2Klead    starting\x1b[2B\r")
    monkeypatch.setenv("LINES", "3")
    assert type(progress(["a", "b", "c"], _Tty())) is PlainLines  # more lines than the screen has
    monkeypatch.setenv("TERM", "dumb")
    assert type(progress(["a"], _Tty())) is PlainLines
    p = PlainLines(["lead", "worker"], plain)
    p.show("worker", "started")
    assert plain.getvalue() == "worker  started\n"


def test_an_agent_whose_name_the_home_has_twice_is_refused_with_both_uuids() -> None:
    twin = row()
    twin["agent"] = {**twin["agent"], "uuid": "u-other"}
    steps, _ = plan_team(team(agent()), [row(), twin])
    assert steps[0].action == "refused"
    assert steps[0].problem is not None
    assert "2 agents named lead (u-lead, u-other)" in steps[0].problem


def test_an_agents_worktree_cannot_change_in_place_and_an_unchanged_one_is_kept() -> None:
    """docs/guide/teams.md#a-worktree-per-agent: the file's worktree branch against the one the home shows."""
    want = TeamAgent(name="lead", provider="codex", workspace=WS, mode=None, approve_tools=(), auth=None,
                     settings=('model="m"',), line=3, worktree="wardian/lead")
    have = {**row(workspace="/tmp/h/worktrees/lead"), "worktree": {"branch": "wardian/lead"}}
    assert plan_agent(team(want), want, have).action == "keep"
    other = {**have, "worktree": {"branch": "review/one"}}
    step = plan_agent(team(want), want, other)
    assert step.action == "refused"
    assert step.problem is not None
    assert plan_agent(team(want), want, row()).action == "refused"  # the home's agent has no worktree
    assert plan_agent(team(agent()), agent(), have).action == "refused"  # the file's agent has none
