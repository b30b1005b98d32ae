"""`load_team`: a valid team file read into its agents, each with what `agent add` and `agent start` get."""

from __future__ import annotations

from pathlib import Path

import pytest

from wardian.team import DEFAULT_FILE, Team, TeamFileError, load_team

pytestmark = pytest.mark.fast


def write(tmp_path: Path, text: str, name: str = DEFAULT_FILE) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_team_file_gives_each_agent_its_provider_grants_mode_and_merged_settings(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    path = write(tmp_path, """\
[team]
home = "run/home"
console = "127.0.0.1:0"

[defaults.codex]
model = "o4-mini"
model_reasoning_effort = "low"
features.web_search = false

[agents.lead]
provider = "codex"
workspace = "ws"
mode = "attached"
approve_tools = ["reply", "send_message"]
auth = "work"

[agents.lead.settings]
model = "o3"

[agents.worker]
provider = "opencode"
settings.model = "wardian/scripted"
settings.provider = { wardian = { npm = "x" } }
""")
    team = load_team(path, environ={"WARDIAN_HOME": "/elsewhere"})
    assert team == Team(path=path, home=tmp_path / "run" / "home", console="127.0.0.1:0", agents=team.agents)
    lead, worker = team.agents
    assert (lead.name, lead.provider, lead.workspace, lead.mode, lead.auth, lead.line) == (
        "lead", "codex", (tmp_path / "ws").resolve(), "attached", "work", 10)
    assert lead.approve_tools == ("send_message", "reply")  # the tool table's order
    assert lead.settings == ('features.web_search=false', 'model="o3"', 'model_reasoning_effort="low"')
    assert (worker.provider, worker.mode, worker.workspace, worker.line) == ("opencode", None, None, 20)
    assert worker.settings == ('model="wardian/scripted"', 'provider={ wardian = { npm = "x" } }')


def test_the_home_is_the_files_else_wardian_home_else_beside_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[agents.a]\nprovider = "claude"\n')
    assert load_team(path, environ={"WARDIAN_HOME": str(tmp_path / "h")}).home == tmp_path / "h"
    assert load_team(path, environ={}).home == tmp_path / ".wardian"


def test_a_broken_file_names_every_problem_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, """\
[team]
colour = "blue"

[agents.lead]
provider = "codex"
mode = "sideways"

[agents.worker]
provider = "gemini"
""")
    with pytest.raises(TeamFileError) as caught:
        load_team(path, environ={})
    assert [str(p) for p in caught.value.problems] == [
        f"{path}:2: team.colour: unknown key 'colour'; allowed: home, console",
        f"{path}:6: agents.lead.mode: unknown mode 'sideways'; allowed: background, attached",
        f"{path}:9: agents.worker.provider: unknown provider 'gemini'; allowed: codex, opencode, claude",
    ]
    assert caught.value.code == "invalid_team_file"
