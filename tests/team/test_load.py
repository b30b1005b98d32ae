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
    assert lead.approve_tools == ("reply", "send_message")
    assert lead.settings == ('features.web_search=false', 'model="o3"', 'model_reasoning_effort="low"')
    assert (worker.provider, worker.mode, worker.workspace, worker.line) == ("opencode", None, None, 20)
    assert worker.settings == ('model="wardian/scripted"', 'provider={ wardian = { npm = "x" } }')


def test_the_teams_notify_command_is_kept_as_the_list_the_file_gives(tmp_path: Path) -> None:
    """docs/guide/approvals.md#notifications: `wardian up` starts the app with it as `--notify-command`."""
    path = write(tmp_path, '[team]\nnotify = ["curl", "--data-binary", "@-", "https://h/x?a=1 b"]\n'
                           '[agents.a]\nprovider = "claude"\n')
    assert load_team(path, environ={}).notify == ("curl", "--data-binary", "@-", "https://h/x?a=1 b")
    assert load_team(write(tmp_path, '[agents.a]\nprovider = "claude"\n'), environ={}).notify is None


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
provider = "goose"
""")
    with pytest.raises(TeamFileError) as caught:
        load_team(path, environ={})
    assert [str(p) for p in caught.value.problems] == [
        f"{path}:2: team.colour: unknown key 'colour'; allowed: home, console, notify, task_deadline, "
        "max_task_depth, max_chain_tasks",
        f"{path}:6: agents.lead.mode: unknown mode 'sideways'; allowed: background, attached",
        f"{path}:9: agents.worker.provider: unknown provider 'goose'; allowed: codex, opencode, claude, qwen, "
        "gemini, pi, acp",
    ]
    assert caught.value.code == "invalid_team_file"


def test_an_agents_setting_replaces_the_defaults_at_below_and_above_its_key(tmp_path: Path) -> None:
    path = write(tmp_path, """\
[defaults.opencode]
model = "d/m"
provider.wardian.npm = "pkg"
provider.wardian.options.baseURL = "http://127.0.0.1:1/v1"
agent.build.temperature = 0.1

[agents.replaces_a_table]
provider = "opencode"
settings.provider = { other = { npm = "x" } }

[agents.goes_below_a_leaf]
provider = "opencode"
settings.model = "own/m"
settings.agent.build.temperature = 0.5
settings.agent.plan.temperature = 0.9
""")
    first, second = load_team(path, environ={}).agents
    assert first.settings == ("agent.build.temperature=0.1", 'model="d/m"', 'provider={ other = { npm = "x" } }')
    assert second.settings == ("agent.build.temperature=0.5", "agent.plan.temperature=0.9", 'model="own/m"',
                               'provider.wardian.npm="pkg"', 'provider.wardian.options.baseURL="http://127.0.0.1:1/v1"')


def test_values_are_written_back_as_toml_that_reads_the_same(tmp_path: Path) -> None:
    path = write(tmp_path, """\
[agents.a]
provider = "codex"
[agents.a.settings]
text = 'C:\\path "quoted"\ttab'
multi = \"\"\"
two
lines\"\"\"
when = 1979-05-27T07:32:00-08:00
day = 1979-05-27
big = 1e300
inf = -inf
list = [1, "two", [3.5], { k = true }]
"a.b"."c d" = 1
""")
    (agent,) = load_team(path, environ={}).agents
    assert agent.settings == (
        '"a.b"."c d"=1', "big=1e+300", "day=1979-05-27", "inf=-inf", 'list=[1, "two", [3.5], { k = true }]',
        'multi="two\\nlines"', 'text="C:\\\\path \\"quoted\\"\\ttab"', "when=1979-05-27T07:32:00-08:00")


def test_agents_may_be_written_as_dotted_keys_or_inline_tables(tmp_path: Path) -> None:
    path = write(tmp_path, """\
# a comment
[agents]
lead.provider = "codex"
lead.settings.model = "o3"

worker = { provider = "claude", settings = { model = "sonnet", permissions = { allow = ["Bash"] } } }
""")
    lead, worker = load_team(path, environ={}).agents
    assert (lead.line, lead.settings) == (3, ('model="o3"',))
    assert (worker.line, worker.settings) == (6, ('model="sonnet"', 'permissions={ allow = ["Bash"] }'))


def test_paths_read_from_the_files_directory_and_from_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user" / "src").mkdir(parents=True)
    (tmp_path / "team").mkdir()
    path = write(tmp_path / "team", '[team]\nhome = "~/h"\n[agents.a]\nprovider = "codex"\nworkspace = "~/src"\n'
                 '[agents.b]\nprovider = "codex"\nworkspace = ".."\n')
    team = load_team(path, environ={})
    assert team.home == tmp_path / "user" / "h"
    assert [a.workspace for a in team.agents] == [(tmp_path / "user" / "src").resolve(), tmp_path.resolve()]
    monkeypatch.chdir(tmp_path)
    assert load_team(Path("team/wardian.toml"), environ={}).path == path


def test_the_guides_merged_settings_are_what_the_loader_gives(tmp_path: Path) -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "team-file.md").read_text(encoding="utf-8")
    example = guide.split("Tables are read key by key", 1)[1]
    toml_block = example.split("```toml\n", 1)[1].split("```", 1)[0]
    text_block = example.split("```text\n", 1)[1].split("```", 1)[0]
    (agent,) = load_team(write(tmp_path, toml_block), environ={}).agents
    assert agent.settings == tuple(text_block.splitlines())


def test_settings_are_sorted_by_key(tmp_path: Path) -> None:
    path = write(tmp_path, '[agents.a]\nprovider = "codex"\n[agents.a.settings]\n"a-b" = 1\na = 2\nb.c = 3\nab = 4\n')
    assert load_team(path, environ={}).agents[0].settings == ("a=2", "a-b=1", "ab=4", "b.c=3")


def test_the_team_s_task_deadline_and_loop_limits_become_its_policy(tmp_path: Path) -> None:
    """[team] task_deadline, max_task_depth and max_chain_tasks (docs/guide/teams.md); left out, the defaults."""
    from wardian.taskpolicy import TaskPolicy

    path = write(tmp_path, '[team]\ntask_deadline = "1h 30m"\nmax_task_depth = 3\nmax_chain_tasks = 20\n'
                           '[agents.a]\nprovider = "codex"\n')
    assert load_team(path, environ={}).policy == TaskPolicy(90 * 60_000, 3, 20)
    path = write(tmp_path, '[agents.a]\nprovider = "codex"\n')
    assert load_team(path, environ={}).policy == TaskPolicy(None, 8, 64)


def test_an_agent_s_env_table_becomes_its_start_s_env_settings_sorted_by_name(tmp_path: Path) -> None:
    """`env = { … }` is `agent start --env NAME=VALUE` per key (docs/reference/team-file.md)."""
    from wardian.cli.team_run import start_params

    path = write(tmp_path, '[agents.w]\nprovider = "qwen"\n'
                           'env = { OPENAI_MODEL = "m", OPENAI_BASE_URL = "http://h/v1" }\n')
    (agent,) = load_team(path, environ={}).agents
    assert agent.env == ("OPENAI_BASE_URL=http://h/v1", "OPENAI_MODEL=m")
    assert start_params(agent)["env"] == ["OPENAI_BASE_URL=http://h/v1", "OPENAI_MODEL=m"]


def test_an_agent_s_approvals_and_approval_timeout_are_its_start_s_policy_and_deadline(tmp_path: Path) -> None:
    """`approvals = "person"` and `approval_timeout = "90s"` are `agent start --approvals person --approval-timeout
    90`; an agent without them starts with the defaults, deny and 10 minutes (docs/guide/approvals.md)."""
    from wardian.cli.team_run import start_params

    path = write(tmp_path, '[agents.w]\nprovider = "codex"\napprovals = "person"\napproval_timeout = "90s"\n'
                           '[agents.v]\nprovider = "claude"\n')
    w, v = load_team(path, environ={}).agents
    assert (w.approvals, w.approval_timeout_ms) == ("person", 90_000)
    assert {k: start_params(w)[k] for k in ("approvals", "approval_timeout_ms")} == {
        "approvals": "person", "approval_timeout_ms": 90_000}
    assert {k: start_params(v)[k] for k in ("approvals", "approval_timeout_ms")} == {
        "approvals": "deny", "approval_timeout_ms": 600_000}


def test_a_running_agent_whose_approvals_differ_from_the_file_is_restarted(tmp_path: Path) -> None:
    """`wardian up` restarts an agent whose kept policy or deadline is not the file's (a restart gives both)."""
    from wardian.team.plan import changed_fields

    path = write(tmp_path, '[agents.w]\nprovider = "codex"\napprovals = "lead"\napproval_timeout = "1m"\n')
    (w,) = load_team(path, environ={}).agents
    kept = {"mode": "background", "settings": [], "auth": None, "env": [], "approve_tools": []}
    assert changed_fields(w, {"managed": {**kept, "approvals": "deny", "approval_timeout_ms": 600_000}}) == [
        "approvals: deny → lead", "approval_timeout: 600s → 60s"]
    assert changed_fields(w, {"managed": {**kept, "approvals": "lead", "approval_timeout_ms": 60_000}}) == []


def test_an_agent_s_allow_rules_are_its_start_s_and_up_restarts_it_when_they_change(tmp_path: Path) -> None:
    """`allow = [...]` is `agent start --allow` for each rule, kept in the file's order; an agent without it starts
    with none (so `up` clears rules the file dropped), and `up` restarts an agent whose kept rules differ
    (docs/guide/approvals.md#allow-rules)."""
    from wardian.cli.team_run import start_params
    from wardian.team.plan import changed_fields

    path = write(tmp_path, '[agents.w]\nprovider = "claude"\nallow = ["Bash(git status:*)", " edit "]\n'
                           '[agents.v]\nprovider = "codex"\n')
    w, v = load_team(path, environ={}).agents
    assert w.allow == ("Bash(git status:*)", "edit")
    assert (start_params(w)["allow"], start_params(v)["allow"]) == (["Bash(git status:*)", "edit"], [])
    kept = {"mode": "background", "settings": [], "auth": None, "env": [], "approve_tools": [], "approvals": "deny",
            "approval_timeout_ms": 600_000}
    assert changed_fields(w, {"managed": {**kept, "allow": ["Bash(git status:*)"]}}) == [
        "allow: Bash(git status:*) → Bash(git status:*), edit"]
    assert changed_fields(w, {"managed": {**kept, "allow": ["Bash(git status:*)", "edit"]}}) == []
    assert changed_fields(v, {"managed": {**kept, "allow": ["edit"]}}) == ["allow: edit → none"]


def test_a_generic_acp_agent_takes_its_command_line_as_an_array(tmp_path: Path) -> None:
    """`provider = "acp"` with `command = [...]`: what `agent add --provider acp --command` takes
    (docs/guide/acp.md#any-acp-agent)."""
    path = write(tmp_path, '[agents.w]\nprovider = "acp"\ncommand = ["opencode", "acp", "--log-level", "WARN"]\n')
    (agent,) = load_team(path, environ={}).agents
    assert (agent.provider, agent.command) == ("acp", ("opencode", "acp", "--log-level", "WARN"))


@pytest.mark.parametrize(("text", "why"), [
    ('provider = "acp"\n', "an `acp` agent needs the command"),
    ('provider = "acp"\ncommand = []\n', "an `acp` agent needs the command"),
    ('provider = "acp"\ncommand = "opencode acp"\n', "must be an array of strings"),
    ('provider = "acp"\ncommand = ["opencode", ""]\n', "the command has an empty word"),
    ('provider = "codex"\ncommand = ["codex"]\n', "only an `acp` agent takes a command"),
])
def test_a_missing_malformed_or_misplaced_command_is_a_problem_of_its_line(tmp_path: Path, text: str,
                                                                           why: str) -> None:
    path = write(tmp_path, "[agents.w]\n" + text)
    with pytest.raises(TeamFileError) as caught:
        load_team(path, environ={})
    (problem,) = caught.value.problems
    assert (problem.field, why in problem.message) == ("agents.w.command", True)


def test_worktree_true_gives_the_default_branch_and_the_files_folder_as_the_repository(tmp_path: Path) -> None:
    """docs/guide/teams.md#a-worktree-per-agent: with `worktree`, `workspace` names the repository."""
    (tmp_path / "other").mkdir()
    team = load_team(write(tmp_path, '[agents.lead]\nprovider = "codex"\nworktree = true\n\n[agents.critic]\n'
                                     'provider = "codex"\nworktree = "review/one"\nworkspace = "other"\n\n'
                                     '[agents.plain]\nprovider = "codex"\nworktree = false\n'))
    assert [(a.name, a.worktree, a.workspace) for a in team.agents] == [
        ("lead", "wardian/lead", tmp_path), ("critic", "review/one", tmp_path / "other"), ("plain", None, None)]
