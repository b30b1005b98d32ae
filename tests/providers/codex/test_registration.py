"""`wardian codex register` (CFG-1 ... CFG-4, APR-2), run as the real CLI against a real app."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import tomlkit

from tests.conftest import AppHandle, pinned_npm_tool, wardian_cmd
from wardian import errors
from wardian.cli.codex import COMMAND as CODEX_REGISTER
from wardian.cli.register import cmd_register
from wardian.errors import CliNotFound
from wardian.protocol.tools import TOOL_NAMES

REPO = Path(__file__).resolve().parents[3]
CODEX = REPO / "node_modules" / ".bin" / "codex"

USER_CONFIG = """\
# My Codex settings: keep this comment.
model = "o3"  # trailing comment
approval_policy = "never"

[mcp_servers.docs]
# the docs server is off for now
command = "docs-mcp"
args = ["--stdio"]
enabled = false

[mcp_servers.docs.tools.search]
approval_mode = "approve"

[projects."/work/repo"]
trust_level = "trusted"
"""


def register(app: AppHandle, codex_home: Path, agent: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return app.cli("codex", "register", "--codex-home", str(codex_home), "--agent", agent, *extra)


def register_json(app: AppHandle, codex_home: Path, agent: str, *extra: str) -> dict[str, Any]:
    proc = register(app, codex_home, agent, "--json", *extra)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return dict(orjson.loads(proc.stdout))


def assert_user_lines_kept(text: str) -> None:
    """Every line of USER_CONFIG, comments included, is still there byte for byte and in order."""
    remaining = iter(text.splitlines())
    for line in USER_CONFIG.splitlines():
        assert any(candidate == line for candidate in remaining), line


def load(codex_home: Path) -> dict[str, Any]:
    return tomlkit.parse((codex_home / "config.toml").read_text(encoding="utf-8")).unwrap()


def test_register_writes_the_wardian_entry_for_the_managed_agent(app: AppHandle, tmp_path: Path) -> None:
    """CFG-1, CFG-4: the absolute path of the running wardian, args ["mcp", "serve"], env WARDIAN_HOME and
    WARDIAN_SESSION_ID, tool_timeout_sec = 70; no approval unless asked."""
    agent, _ = app.add_agent("reviewer")
    codex_home = tmp_path / "codex-home"  # does not exist yet
    summary = register_json(app, codex_home, "reviewer")
    entry = load(codex_home)["mcp_servers"]["wardian"]
    command = Path(entry["command"])
    assert command.is_absolute()
    assert os.access(command, os.X_OK)
    assert entry["args"] == ["mcp", "serve"]
    assert entry["tool_timeout_sec"] == 70
    assert entry["env"]["WARDIAN_HOME"] == str(app.home.root)
    assert "tools" not in entry  # "Registration does not grant approval"
    # The written session is a live session of exactly this agent.
    listed = app.call("agent/list", {"session": entry["env"]["WARDIAN_SESSION_ID"]})
    assert listed["caller"]["uuid"] == agent["uuid"]
    assert (codex_home / "config.toml").stat().st_mode & 0o077 == 0  # it holds a secret
    assert summary["created"] is True
    assert summary["command"] == entry["command"]


def test_the_registered_command_starts_a_working_mcp_server(app: AppHandle, tmp_path: Path) -> None:
    """CFG-2: never write something that will not launch: the entry, run as written, answers initialize."""
    app.add_agent("launcher-check")
    register_json(app, tmp_path, "launcher-check")
    entry = load(tmp_path)["mcp_servers"]["wardian"]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}, **entry["env"]}
    init = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n')
    proc = subprocess.run([entry["command"], *entry["args"]], input=init, env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert orjson.loads(proc.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "wardian"


def test_register_preserves_user_entries_comments_disabled_state_and_approval_settings(
        app: AppHandle, tmp_path: Path) -> None:
    """CFG-2: registration preserves user-owned entries, disabled state, and approval settings (tomlkit)."""
    app.add_agent("worker")
    (tmp_path / "config.toml").write_text(USER_CONFIG, encoding="utf-8")
    register_json(app, tmp_path, "worker")
    text = (tmp_path / "config.toml").read_text(encoding="utf-8")
    assert_user_lines_kept(text)
    assert '\n\n[projects."/work/repo"]' in text  # our table ends with a blank line before the user's next one
    # Our own entry, disabled by the user and given user settings, keeps them on re-registration.
    doc = tomlkit.parse(text)
    doc["mcp_servers"]["wardian"]["enabled"] = False
    doc["mcp_servers"]["wardian"]["startup_timeout_sec"] = 20
    doc["mcp_servers"]["wardian"]["env"]["EXTRA"] = "kept"
    doc["mcp_servers"]["wardian"]["tools"] = {"list_agents": {"approval_mode": "prompt"}}
    (tmp_path / "config.toml").write_text(tomlkit.dumps(doc), encoding="utf-8")
    summary = register_json(app, tmp_path, "worker", "--approve-tools", "send_message")
    assert summary["created"] is False
    assert summary["enabled"] is False
    after = load(tmp_path)
    entry = after["mcp_servers"]["wardian"]
    assert entry["enabled"] is False
    assert entry["startup_timeout_sec"] == 20
    assert entry["env"]["EXTRA"] == "kept"
    assert entry["tools"] == {"list_agents": {"approval_mode": "prompt"}, "send_message": {"approval_mode": "approve"}}
    assert after["mcp_servers"]["docs"] == {"command": "docs-mcp", "args": ["--stdio"], "enabled": False,
                                            "tools": {"search": {"approval_mode": "approve"}}}
    assert_user_lines_kept((tmp_path / "config.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("occupant", [
    '[mcp_servers.wardian]\ncommand = "npx"\nargs = ["-y", "someone-elses-wardian"]\n',
    '[mcp_servers.wardian]\ncommand = "/opt/wardian/bin/wardian"\nargs = ["mcp", "serve"]\n\n'
    '[mcp_servers.wardian.env]\nWARDIAN_HOME = "/srv/another-home"\n',
    'mcp_servers = "not a table"\n',
], ids=["other-program", "another-home", "not-a-table"])
def test_an_occupied_wardian_entry_that_is_not_ours_is_reported_and_nothing_is_overwritten(
        app: AppHandle, tmp_path: Path, occupant: str) -> None:
    """CFG-2: an occupied server name is reported instead of silently replacing configuration."""
    app.add_agent("blocked")
    config = tmp_path / "config.toml"
    config.write_text(occupant, encoding="utf-8")
    proc = register(app, tmp_path, "blocked", "--json")
    assert proc.returncode == 2
    assert orjson.loads(proc.stdout)["error"]["code"] == "registration_conflict"
    assert config.read_text(encoding="utf-8") == occupant


def test_approve_tools_grants_only_the_named_tools(app: AppHandle, tmp_path: Path) -> None:
    """APR-2: only when asked, per-tool approval_mode = "approve" for exactly the named tools."""
    app.add_agent("granted")
    summary = register_json(app, tmp_path, "granted", "--approve-tools", "reply, send_message,followup_task")
    assert summary["approved_tools"] == ["send_message", "followup_task", "reply"]
    tools = load(tmp_path)["mcp_servers"]["wardian"]["tools"]
    assert tools == {name: {"approval_mode": "approve"} for name in ("send_message", "followup_task", "reply")}


@pytest.mark.parametrize("value", ["send_message,post_message", "send_message,", "SEND_MESSAGE", ""])
def test_unknown_tool_names_are_rejected_with_a_clear_error_and_nothing_is_written(
        app: AppHandle, tmp_path: Path, value: str) -> None:
    """APR-2: an --approve-tools name that is not one of the eight tools is refused before anything changes."""
    app.add_agent("strict")
    proc = register(app, tmp_path, "strict", "--json", "--approve-tools", value)
    assert proc.returncode == 2
    error = orjson.loads(proc.stdout)["error"]
    assert (error["code"], error["field"]) == ("invalid_arguments", "approve_tools")
    assert error["allowed"] == ", ".join(TOOL_NAMES)
    assert not (tmp_path / "config.toml").exists()


def test_register_prints_the_equivalent_codex_mcp_add_line_without_the_secret(
        app: AppHandle, tmp_path: Path) -> None:
    """CFG-3: print the equivalent `codex mcp add wardian -- wardian mcp serve` line; secrets are never
    printed (row S6)."""
    app.add_agent("printer")
    proc = register(app, tmp_path, "printer")
    assert proc.returncode == 0
    out = proc.stdout.decode("utf-8")
    command = load(tmp_path)["mcp_servers"]["wardian"]["command"]
    [line] = [line.strip() for line in out.splitlines() if line.strip().startswith("codex mcp add wardian ")]
    assert line.endswith(f"-- {command} mcp serve")
    assert f"--env WARDIAN_HOME={app.home.root}" in line
    token = load(tmp_path)["mcp_servers"]["wardian"]["env"]["WARDIAN_SESSION_ID"]
    assert token not in out
    assert token not in proc.stderr.decode("utf-8")


def test_the_users_global_codex_home_is_never_touched(app: AppHandle, tmp_path: Path) -> None:
    """CFG-1: the app's global provider home is not modified; registration targets a private CODEX_HOME only."""
    app.add_agent("private")
    fake_home = tmp_path / "user"
    env = {**app.env(), "HOME": str(fake_home)}
    proc = subprocess.run([*wardian_cmd(), "codex", "register", "--codex-home", str(fake_home / ".codex"),
                           "--agent", "private", "--json"], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert orjson.loads(proc.stdout)["error"]["field"] == "codex_home"
    assert not fake_home.exists()


def test_a_missing_app_or_agent_is_reported_and_nothing_is_written(app: AppHandle, tmp_path: Path) -> None:
    """MCP-3: registration needs the agent's session from the running app; without it nothing changes."""
    proc = register(app, tmp_path, "no-such-agent", "--json")
    assert proc.returncode == 4
    assert orjson.loads(proc.stdout)["error"]["code"] == "unknown_agent"
    assert not (tmp_path / "config.toml").exists()
    env = {**app.env(), "WARDIAN_HOME": str(tmp_path / "no-app-here")}
    proc = subprocess.run([*wardian_cmd(), "codex", "register", "--codex-home", str(tmp_path), "--agent", "x",
                           "--json"], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 3
    assert orjson.loads(proc.stdout)["error"]["code"] == "app_not_running"
    assert list(tmp_path.iterdir()) == []


def test_an_unparseable_config_is_reported_and_left_as_it_is(app: AppHandle, tmp_path: Path) -> None:
    """CFG-2: preserve everything user-owned: a config we cannot parse is never rewritten."""
    app.add_agent("careful")
    broken = "model = \n[[[ not toml\n"
    (tmp_path / "config.toml").write_text(broken, encoding="utf-8")
    proc = register(app, tmp_path, "careful", "--json")
    assert proc.returncode == 2
    assert (tmp_path / "config.toml").read_text(encoding="utf-8") == broken


def test_a_missing_cli_is_reported_before_anything_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CFG-2: a missing CLI is reported; never silently write a command that will not launch."""
    if getattr(sys, "frozen", False):
        pytest.skip("a frozen build registers its own executable")
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bindir / "python"))  # an interpreter with no wardian beside it
    args = argparse.Namespace(codex_home=str(tmp_path / "codex"), agent="a", approve_tools=None,
                              home=str(tmp_path / "home"), json=True, registration=CODEX_REGISTER)
    with pytest.raises(CliNotFound) as caught:
        cmd_register(args)
    assert isinstance(caught.value, errors.WardianError)
    assert caught.value.code == "cli_not_found"
    assert not (tmp_path / "codex").exists()
    assert not (tmp_path / "home").exists()


@pytest.fixture
def codex() -> Path:
    return pinned_npm_tool(CODEX, "Codex CLI")


def test_real_codex_lists_the_registered_server(codex: Path, app: AppHandle, tmp_path: Path) -> None:
    """CFG-1: after `wardian codex register` into a fresh private home, `codex mcp list` shows the server."""
    app.add_agent("listed")
    codex_home = tmp_path / "codex-home"
    register_json(app, codex_home, "listed", "--approve-tools", "send_message")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARDIAN_", "CODEX_", "OPENAI_"))}
    env.update(CODEX_HOME=str(codex_home), HOME=str(tmp_path))
    proc = subprocess.run([str(codex), "mcp", "list", "--json"], env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    [server] = [s for s in orjson.loads(proc.stdout) if s["name"] == "wardian"]
    entry = load(codex_home)["mcp_servers"]["wardian"]
    assert server["enabled"] is True
    assert server["transport"]["command"] == entry["command"]
    assert server["transport"]["args"] == ["mcp", "serve"]
    assert server["transport"]["env"]["WARDIAN_HOME"] == str(app.home.root)
    assert server["tool_timeout_sec"] == 70
