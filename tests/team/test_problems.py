"""Every way a team file can be wrong: each problem names FILE:LINE, the field and what is allowed, all problems of
a file come at once (in the order of its lines), and nothing else than `TeamFileError` is ever raised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wardian import errors
from wardian.approval_rules import RULE_ALLOWED
from wardian.branches import BRANCH_ALLOWED
from wardian.cli.exits import exit_code_for
from wardian.durations import DURATION_ALLOWED
from wardian.team import TeamFileError, load_team

pytestmark = pytest.mark.fast

A = '[agents.a]\nprovider = "codex"\n'
TOML = "; allowed: TOML 1.0 (https://toml.io/en/v1.0.0)"
NAME_RULE = ("allowed: 1..64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit; not a UUID and not "
             "all/everyone/wardian/operator")
TOOLS = ("wait_agent, send_message, followup_task, receive_messages, reply, interrupt_agent, list_agents, "
         "answer_approval")
BAD_KEY = ('a key given to -c is dotted segments of A-Z a-z 0-9 _ -, or double-quoted text without " or =; this '
           "one cannot be passed on")
NO_AGENT = 'the file names no agent; add one: [agents.NAME] with provider = "codex"'


def problems(tmp_path: Path, text: str | bytes) -> list[str]:
    """The problems of a file holding `text`, with its path shown as F."""
    path = tmp_path / "wardian.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(TeamFileError) as caught:
        load_team(path, environ={})
    return [str(p).replace(str(tmp_path), "F") for p in caught.value.problems]


CASES = [
    # the file as TOML
    ("syntax", "a = \n", [f"F/wardian.toml:1: toml: not valid TOML: Invalid value (column 5){TOML}"]),
    ("a table twice", A + "[agents.a]\n",
     [f"F/wardian.toml:3: toml: not valid TOML: Cannot declare ('agents', 'a') twice (column 10){TOML}"]),
    ("unclosed header", "[agents.a\n",
     [f"F/wardian.toml:1: toml: not valid TOML: Expected ']' at the end of a table declaration (column 10){TOML}"]),
    ("too deep", "x = " + "[" * 5000 + "]" * 5000 + "\n" + A,
     ["F/wardian.toml:1: toml: the file nests arrays or tables too deeply to read; a team file needs a few levels"]),
    # the top level and [team]
    ("unknown top key", "colour = 1\n" + A, ["F/wardian.toml:1: colour: unknown key 'colour'; allowed: team, "
                                             "defaults, agents"]),
    ("unknown team key", "[team]\ncolour = 1\n" + A,
     ["F/wardian.toml:2: team.colour: unknown key 'colour'; allowed: home, console, notify, task_deadline, "
      "max_task_depth, max_chain_tasks"]),
    ("notify a string", '[team]\nnotify = "notify-send wardian"\n' + A,
     ['F/wardian.toml:2: team.notify: must be an array of strings (the program and its arguments: ["notify-send", '
      '"wardian"]), not text']),
    ("notify empty", "[team]\nnotify = []\n" + A,
     ['F/wardian.toml:2: team.notify: notify names no command; allowed: a command and its arguments: "notify-send '
      'wardian", or in a team file a list ["notify-send", "wardian"]']),
    ("notify a blank program", '[team]\nnotify = ["", "x"]\n' + A,
     ['F/wardian.toml:2: team.notify: notify names no command; allowed: a command and its arguments: "notify-send '
      'wardian", or in a team file a list ["notify-send", "wardian"]']),
    ("notify not strings", "[team]\nnotify = [1, 2]\n" + A,
     ['F/wardian.toml:2: team.notify: notify must be a command line or a list of strings; allowed: a command and its '
      'arguments: "notify-send wardian", or in a team file a list ["notify-send", "wardian"]']),
    ("deadline not a duration", '[team]\ntask_deadline = "soon"\n' + A,
     ["F/wardian.toml:2: team.task_deadline: task_deadline 'soon' is not a duration; allowed: a duration of 1s..7d, "
      "as digits and a unit (ms, s, m, h, d), e.g. 90s, 10m, 1h30m"]),
    ("deadline over a week", '[team]\ntask_deadline = "8d"\n' + A,
     ["F/wardian.toml:2: team.task_deadline: task_deadline '8d' is outside 1s..7d; allowed: a duration of 1s..7d, "
      "as digits and a unit (ms, s, m, h, d), e.g. 90s, 10m, 1h30m"]),
    ("deadline a number", "[team]\ntask_deadline = 30\n" + A,
     ['F/wardian.toml:2: team.task_deadline: must be a duration such as "30m", not int']),
    ("depth zero", "[team]\nmax_task_depth = 0\n" + A,
     ["F/wardian.toml:2: team.max_task_depth: must be an integer 1..1000, not 0"]),
    ("chain budget a string", '[team]\nmax_chain_tasks = "64"\n' + A,
     ["F/wardian.toml:2: team.max_chain_tasks: must be an integer 1..100000, not '64'"]),
    ("team not a table", "team = 5\n" + A, ["F/wardian.toml:1: team: must be a table ([team]), not an integer"]),
    ("empty home", '[team]\nhome = ""\n' + A,
     ["F/wardian.toml:2: team.home: must be a non-empty string, not an empty string"]),
    ("home not a string", "[team]\nhome = 5\n" + A,
     ["F/wardian.toml:2: team.home: must be a non-empty string, not an integer"]),
    ("console elsewhere", '[team]\nconsole = "10.0.0.1:80"\n' + A,
     ["F/wardian.toml:2: team.console: console address '10.0.0.1:80' is not a loopback address; the console serves "
      "only this machine (from elsewhere, tunnel to it: ssh -L 8765:127.0.0.1:8765 THIS_HOST); allowed: "
      "127.0.0.1:PORT, localhost:PORT, [::1]:PORT or PORT alone (PORT 0..65535, 0 picks a free one); default "
      "127.0.0.1:8765"]),
    ("console a number", "[team]\nconsole = 8765\n" + A,
     ["F/wardian.toml:2: team.console: must be a non-empty string, not an integer"]),
    # [defaults]
    ("defaults of no provider", '[defaults.goose]\nmodel = "x"\n' + A,
     ["F/wardian.toml:1: defaults.goose: [defaults.goose] names no provider; allowed: codex, opencode, claude, "
      "qwen, gemini, pi, acp"]),
    ("defaults not a table", "defaults = 5\n" + A,
     ["F/wardian.toml:1: defaults: must be a table ([defaults]), not an integer"]),
    ("provider defaults not a table", "defaults.codex = 5\n" + A,
     ["F/wardian.toml:1: defaults.codex: must be a table ([defaults.codex]), not an integer"]),
    ("a default -c cannot take", '[defaults.codex]\n"a=b" = 1\n' + A,
     [f'F/wardian.toml:2: defaults.codex."a=b": {BAD_KEY}']),
    # [agents]
    ("no agents", "[team]\n", [f"F/wardian.toml:1: agents: {NO_AGENT}"]),
    ("empty agents", "[agents]\n", [f"F/wardian.toml:1: agents: {NO_AGENT}"]),
    ("agents not a table", "agents = 5\n", ["F/wardian.toml:1: agents: must be a table ([agents]), not an integer"]),
    ("agents an array of tables", '[[agents]]\nprovider = "codex"\n',
     ["F/wardian.toml:1: agents: must be a table ([agents]), not an array"]),
    ("an agent not a table", "[agents]\na = 5\n",
     ["F/wardian.toml:2: agents.a: must be a table ([agents.a]), not an integer"]),
    ("reserved name", '[agents.all]\nprovider = "codex"\n',
     [f"F/wardian.toml:1: agents.all: agent name 'all' is not allowed; {NAME_RULE}"]),
    ("reserved name in capitals", '[agents.Operator]\nprovider = "codex"\n',
     [f"F/wardian.toml:1: agents.Operator: agent name 'Operator' is not allowed; {NAME_RULE}"]),
    ("a UUID as name", '[agents.123e4567-e89b-12d3-a456-426614174000]\nprovider = "codex"\n',
     ["F/wardian.toml:1: agents.123e4567-e89b-12d3-a456-426614174000: agent name "
      f"'123e4567-e89b-12d3-a456-426614174000' is not allowed; {NAME_RULE}"]),
    ("name starting with a dash", '[agents."-x"]\nprovider = "codex"\n',
     [f"F/wardian.toml:1: agents.-x: agent name '-x' is not allowed; {NAME_RULE}"]),
    ("unknown agent key", A + "colour = 1\n",
     ["F/wardian.toml:3: agents.a.colour: unknown key 'colour'; allowed: provider, workspace, mode, approve_tools, "
      "auth, settings, command, env, worktree, approvals, approval_timeout, allow"]),
    ("approvals not a policy", A + 'approvals = "ask"\n',
     ["F/wardian.toml:3: agents.a.approvals: must be one of deny, person, lead (approvals = \"person\"), not 'ask'"]),
    ("approval_timeout not text", A + "approval_timeout = 600\n",
     ['F/wardian.toml:3: agents.a.approval_timeout: must be a duration as text (approval_timeout = "10m"), not an '
      "integer"]),
    ("approval_timeout not a duration", A + 'approval_timeout = "soon"\n',
     ["F/wardian.toml:3: agents.a.approval_timeout: approval_timeout 'soon' is not a duration; allowed: "
      + DURATION_ALLOWED]),
    ("allow rule not a rule", A + 'allow = ["Bash(ls *)", "Bash(git status"]\n',
     ["F/wardian.toml:3: agents.a.allow: 'Bash(git status' is not an allow rule; allowed: " + RULE_ALLOWED]),
    ("allow not an array of text", A + 'allow = "edit"\n',
     ['F/wardian.toml:3: agents.a.allow: must be an array of rules (allow = ["Bash(git status:*)"]), not text']),
    ("allow holding a number", A + 'allow = ["edit", 3]\n',
     ['F/wardian.toml:3: agents.a.allow: must be an array of rules (allow = ["Bash(git status:*)"]), not an array '
      "holding an integer"]),
    ("worktree not true or a branch", A + "worktree = 3\n",
     ['F/wardian.toml:3: agents.a.worktree: must be true or a branch name (worktree = "feature"), not an integer']),
    ("worktree branch git refuses", A + 'worktree = "a..b"\n',
     [f"F/wardian.toml:3: agents.a.worktree: 'a..b' is not a branch name git accepts; allowed: {BRANCH_ALLOWED}"]),
    ("worktree of a name git refuses as a branch", '[agents."x.lock"]\nprovider = "codex"\nworktree = true\n',
     ["F/wardian.toml:3: agents.\"x.lock\".worktree: 'wardian/x.lock' is not a branch name git accepts; allowed: "
      f"{BRANCH_ALLOWED}"]),
    ("no provider", '[agents.a]\nmode = "background"\n',
     ["F/wardian.toml:1: agents.a: provider is required; allowed: codex, opencode, claude, qwen, gemini, pi, acp"]),
    ("provider not a string", "[agents.a]\nprovider = 5\n",
     ["F/wardian.toml:2: agents.a.provider: must be a non-empty string, not an integer"]),
    ("unknown provider", '[agents.a]\nprovider = "goose"\n',
     ["F/wardian.toml:2: agents.a.provider: unknown provider 'goose'; allowed: codex, opencode, claude, qwen, gemini, "
      "pi, acp"]),
    ("missing workspace", A + 'workspace = "nope"\n',
     ["F/wardian.toml:3: agents.a.workspace: the workspace F/nope does not exist; allowed: an existing directory "
      "(relative paths are read from the team file's directory)"]),
    ("workspace a file", A + 'workspace = "wardian.toml"\n',
     ["F/wardian.toml:3: agents.a.workspace: the workspace F/wardian.toml is not a directory; allowed: an existing "
      "directory"]),
    ("empty workspace", A + 'workspace = ""\n',
     ["F/wardian.toml:3: agents.a.workspace: must be a non-empty string, not an empty string"]),
    ("unknown mode", A + 'mode = "sideways"\n',
     ["F/wardian.toml:3: agents.a.mode: unknown mode 'sideways'; allowed: background, attached"]),
    ("attached Claude Code", '[agents.a]\nprovider = "claude"\nmode = "attached"\n',
     ["F/wardian.toml:3: agents.a.mode: claude agents have no attached mode: a second Claude Code process resuming "
      "the app's session would write the same transcript with a diverging history; talk to a Claude agent through "
      "wardian (message send, task) instead; allowed: background"]),
    ("attached OpenCode", '[agents.a]\nprovider = "opencode"\nmode = "attached"\n',
     ["F/wardian.toml:3: agents.a.mode: opencode agents have no attached mode; allowed: background"]),
    ("unknown tool", A + 'approve_tools = ["rm", "reply"]\n',
     [f"F/wardian.toml:3: agents.a.approve_tools: approve_tools names no wardian tool: 'rm'; allowed: {TOOLS}"]),
    ("tools as a string", A + 'approve_tools = "reply"\n',
     ['F/wardian.toml:3: agents.a.approve_tools: must be an array of tool names (approve_tools = ["reply"]), not a '
      "string"]),
    ("a tool that is a number", A + "approve_tools = [1]\n",
     ['F/wardian.toml:3: agents.a.approve_tools: must be an array of tool names (approve_tools = ["reply"]); it '
      "holds an integer"]),
    ("grants to OpenCode", '[agents.a]\nprovider = "opencode"\napprove_tools = ["reply"]\n',
     ["F/wardian.toml:3: agents.a.approve_tools: opencode agents take no --approve-tools: opencode has no approval "
      "step for wardian's tools (they run unless the provider's own settings deny them); allowed: no grants; "
      "restrict tools with the provider's settings (-c)"]),
    ("a credential name with a space", A + 'auth = "Work Key"\n',
     ["F/wardian.toml:3: agents.a.auth: 'Work Key' is not a credential name; allowed: 1 to 64 characters of a-z, "
      "0-9, '_', '.' and '-', starting with a letter or digit"]),
    ("auth not a string", A + "auth = 5\n",
     ["F/wardian.toml:3: agents.a.auth: must be a non-empty string, not an integer"]),
    # settings
    ("settings not a table", A + "settings = 5\n",
     ["F/wardian.toml:3: agents.a.settings: must be a table ([agents.a.settings]), not an integer"]),
    ("a key -c cannot take", A + '[agents.a.settings]\n"x\\"y" = "sk-SECRET"\n',
     [f'F/wardian.toml:4: agents.a.settings."x"y": {BAD_KEY}']),
    ("a key -c cannot take, in an inline table", A + 'settings = { ok = 1, "x=y" = "sk-SECRET" }\n',
     [f'F/wardian.toml:3: agents.a.settings."x=y": {BAD_KEY}']),
    ("a Claude Code secret that is not a string", '[agents.a]\nprovider = "claude"\n[agents.a.settings]\n'
     "env.ANTHROPIC_API_KEY = 5\n",
     ["F/wardian.toml:4: agents.a.settings.env.ANTHROPIC_API_KEY: the value of env.ANTHROPIC_API_KEY must be a "
      'string (an environment variable); allowed: text in quotes, e.g. env.NAME="value"']),
    ("too many settings", A + "[agents.a.settings]\n" + "".join(f"k{i} = {i}\n" for i in range(65)),
     ["F/wardian.toml:3: agents.a.settings: 65 settings, counting [defaults.codex]; at most 64 are allowed (as -c)"]),
    ("too many with the defaults", "[defaults.codex]\n" + "".join(f"d{i} = {i}\n" for i in range(40)) + A
     + "[agents.a.settings]\n" + "".join(f"k{i} = {i}\n" for i in range(30)),
     ["F/wardian.toml:44: agents.a.settings: 70 settings, counting [defaults.codex]; at most 64 are allowed (as "
      "-c)"]),
    ("a setting too long", A + '[agents.a.settings]\nx = "' + "y" * 5000 + '"\n',
     ["F/wardian.toml:4: agents.a.settings.x: the setting is longer than 4096 characters as -c KEY=VALUE"]),
    # the file itself
    ("not UTF-8", b'[agents.a]\nprovider = "\xff"\n',
     ["F/wardian.toml:2: file: the file is not UTF-8 text (byte 24); allowed: TOML in UTF-8"]),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in CASES], ids=[c[0] for c in CASES])
def test_each_problem_names_its_line_field_and_what_is_allowed(tmp_path: Path, text: str | bytes,
                                                               expected: list[str]) -> None:
    assert problems(tmp_path, text) == expected


def test_every_problem_of_the_file_comes_at_once_in_the_order_of_its_lines(tmp_path: Path) -> None:
    text = """\
[agents.worker]
provider = "opencode"
mode = "attached"
colour = "blue"

[team]
console = "0.0.0.0"

[agents.lead]
provider = "goose"
approve_tools = ["rm"]
"""
    assert [p.split(": ", 2)[0:2] for p in problems(tmp_path, text)] == [
        ["F/wardian.toml:3", "agents.worker.mode"], ["F/wardian.toml:4", "agents.worker.colour"],
        ["F/wardian.toml:7", "team.console"], ["F/wardian.toml:10", "agents.lead.provider"],
        ["F/wardian.toml:11", "agents.lead.approve_tools"]]


def test_a_missing_file_or_a_directory_is_a_problem_of_line_0(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TeamFileError) as caught:
        load_team(Path("wardian.toml"), environ={})
    assert [str(p) for p in caught.value.problems] == [
        f"{tmp_path}/wardian.toml:0: file: there is no such file; write one with `wardian init wardian.toml`"]
    with pytest.raises(TeamFileError) as caught:
        load_team(tmp_path, environ={})
    assert [str(p) for p in caught.value.problems] == [
        f"{tmp_path}:0: file: this is a directory; give the team file itself (default wardian.toml)"]


def test_a_file_too_large_for_a_team_is_refused_unread(tmp_path: Path) -> None:
    assert problems(tmp_path, "# " + "x" * (1 << 20) + "\n") == [
        "F/wardian.toml:0: file: the file is larger than 1048576 bytes; a team file is a few lines"]


def test_the_error_is_invalid_team_file_exit_2_with_the_problems_as_data(tmp_path: Path) -> None:
    path = tmp_path / "wardian.toml"
    path.write_text(A + 'mode = "sideways"\n[agents.a.settings]\n"x=y" = "sk-SECRET-VALUE"\n', encoding="utf-8")
    with pytest.raises(TeamFileError) as caught:
        load_team(path, environ={})
    exc = caught.value
    assert isinstance(exc, errors.InvalidTeamFile)
    assert (exc.code, exit_code_for(exc), exc.field) == ("invalid_team_file", 2, "team_file")
    assert exc.message.splitlines()[0] == (f"the team file {path} is not valid (2 problems); nothing was started or "
                                           "changed:")
    assert exc.message.splitlines()[1:] == [f"  {p}" for p in exc.problems]
    data = exc.to_data()
    assert data["problems"] == [{"path": str(path), "line": 3, "field": "agents.a.mode",
                                 "message": "unknown mode 'sideways'; allowed: background, attached"},
                                {"path": str(path), "line": 5, "field": 'agents.a.settings."x=y"',
                                 "message": BAD_KEY}]
    assert errors.from_data(json.loads(json.dumps(data))).code == "invalid_team_file"
    # a setting's value may be a secret: no problem, message or wire form quotes one
    assert "sk-SECRET" not in json.dumps(data)
    assert "sk-SECRET" not in str(exc)


def test_lines_count_the_same_with_windows_line_endings_and_a_byte_order_mark(tmp_path: Path) -> None:
    text = '\ufeff[agents.a]\r\nprovider = "codex"\r\n\r\n[agents.b]\r\nprovider = "claude"\r\nmode = "attached"\r\n'
    assert [p.split(": ", 2)[:2] for p in problems(tmp_path, text.encode("utf-8"))] == [
        ["F/wardian.toml:6", "agents.b.mode"]]


def test_the_cli_prints_the_error_with_one_problem_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from wardian.cli.output import print_error

    path = tmp_path / "wardian.toml"
    path.write_text(A + 'mode = "sideways"\ncolour = 1\n', encoding="utf-8")
    with pytest.raises(TeamFileError) as caught:
        load_team(path, environ={})
    print_error(caught.value, as_json=False)
    assert capsys.readouterr().err == (
        f"wardian: invalid_team_file: the team file {path} is not valid (2 problems); nothing was started or "
        f"changed:\n  {path}:3: agents.a.mode: unknown mode 'sideways'; allowed: background, attached\n"
        f"  {path}:4: agents.a.colour: unknown key 'colour'; allowed: provider, workspace, mode, approve_tools, auth, "
        "settings, command, env, worktree, approvals, approval_timeout, allow\n")


def test_an_env_table_of_credentials_or_non_text_is_refused_naming_each_key(tmp_path: Path) -> None:
    """`env = { … }` takes what `agent start --env` does: a credential's name or a value that is not text is a
    problem of its own key (the value never quoted)."""
    text = A + 'env = { OPENAI_BASE_URL = "http://127.0.0.1:9/v1", GITHUB_TOKEN = "canary-v", N = 5 }\n'
    got = problems(tmp_path, text)
    assert [p.split(": ", 2)[1] for p in got] == ["agents.a.env.GITHUB_TOKEN", "agents.a.env.N"]
    assert "canary-v" not in "".join(got)
