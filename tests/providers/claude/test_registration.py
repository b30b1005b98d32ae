"""Registering `wardian mcp serve` with Claude Code (docs/providers/claude.md#registration) and what `prepare` gives
the process: the private `--mcp-config` (0600) the real Claude Code 2.1.328 connects to, the tools it may run
without asking per grant, `wardian claude register` for a Claude Code a person runs, the roster entry, and the
environment (private directories, no inherited credential, no secret on disk under agents/)."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

from tests.conftest import AppHandle, pinned_npm_tool, short_home
from wardian import errors
from wardian.auth.model import Credential, CredentialKind
from wardian.home import MAX_SOCKET_PATH_BYTES, Home
from wardian.providers.base import LaunchSpec, ProviderInfo
from wardian.providers.claude.compat import ENV_CLAUDE, MIN_VERSION, capabilities
from wardian.providers.claude.provider import ClaudeProvider
from wardian.providers.claude.registration import allowed_tools
from wardian.providers.claude.spec import ClaudeSpec, FdCredential
from wardian.providers.process import secret_pipe

CHECKOUT = Path(__file__).resolve().parents[3]
API_KEY = "sk-ant-api03-registration-test-secret-7f3a9c"
ALWAYS = ("mcp__wardian__wait_agent", "mcp__wardian__receive_messages", "mcp__wardian__list_agents")


def claude_or_skip() -> str:
    return str(pinned_npm_tool(CHECKOUT / "node_modules" / ".bin" / "claude", "Claude Code CLI"))


def closed_port() -> int:
    """A loopback port nothing listens on: Claude Code's API client fails fast there, and no model is needed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_spec(home: Home, name: str = "lead", *, session: str = "not-a-real-session", thread_id: str | None = None,
                overrides: tuple[str, ...] = (), grants: tuple[str, ...] = (),
                credentials: tuple[Credential, ...] = ()) -> LaunchSpec:
    agent_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{home.root}/{name}"))
    workspace = home.root / "ws" / name
    workspace.mkdir(parents=True, exist_ok=True)
    home.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return LaunchSpec(name=name, uuid=agent_uuid, agent_dir=home.agent_dir(agent_uuid), workspace=workspace,
                      mode="background", overrides=overrides, approve_tools=grants, home=home, session=session,
                      thread_id=thread_id, log_path=home.provider_log_path("claude", agent_uuid),
                      pid_path=home.provider_pid_path("claude", agent_uuid), credentials=credentials)


def build(spec: LaunchSpec, executable: str = "claude") -> ClaudeSpec:
    info = ProviderInfo(executable=executable, version=str(MIN_VERSION), capabilities=capabilities(MIN_VERSION))
    return ClaudeProvider.build_spec(spec, info)


class StreamJson:
    """A real `claude -p` on stream-json, for what this module checks: control requests and their responses."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, credential: FdCredential | None = None) -> None:
        fds: tuple[int, ...] = ()
        if credential is not None:  # as the runtime hands it over: on a descriptor, at each start
            fds = (secret_pipe(credential.secret),)
            env = {**env, credential.variable: str(fds[0])}
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True,
                                         pass_fds=fds)
        finally:
            for fd in fds:
                os.close(fd)
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._ids = iter(range(1, 1_000_000))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def control(self, subtype: str, timeout_s: float = 60.0) -> dict[str, Any]:
        request_id = f"req_{next(self._ids)}"
        assert self.proc.stdin is not None
        line = {"type": "control_request", "request_id": request_id, "request": {"subtype": subtype}}
        self.proc.stdin.write(json.dumps(line).encode() + b"\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout_s
        while True:
            message = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert message is not None, "claude exited before answering"
            response = message.get("response", {})
            if message["type"] == "control_response" and response.get("request_id") == request_id:
                assert response["subtype"] == "success", response
                return response["response"]

    def server_status(self, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """The MCP server's entry in `mcp_status` once it is no longer pending (polled: nothing announces it)."""
        deadline = time.monotonic() + timeout_s
        while True:
            servers = {s["name"]: s for s in self.control("mcp_status")["mcpServers"]}
            if servers[name]["status"] != "pending" or time.monotonic() > deadline:
                return servers[name]
            time.sleep(0.1)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@contextmanager
def stream_json(argv: list[str], env: dict[str, str], cwd: Path,
                credential: FdCredential | None = None) -> Iterator[StreamJson]:
    claude = StreamJson(argv, env, cwd, credential)
    try:
        yield claude
    finally:
        claude.close()


STREAM = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]


# --- the roster ----------------------------------------------------------------------------------------------------

def test_agent_add_takes_claude_and_attached_mode_is_refused_with_the_reason(app: AppHandle) -> None:
    claude_or_skip()
    out = app.cli("agent", "add", "lead", "--provider", "claude", "--workspace", str(app.home.root / "ws"))
    assert out.returncode == 0, out.stderr
    assert b"claude)" in out.stdout
    listed = {a["name"]: a for a in app.call("agent/list")["agents"]}
    assert listed["lead"]["provider"] == "claude"
    with pytest.raises(errors.Unsupported) as exc:
        app.call("agent/start", {"agent": "lead", "mode": "attached"})
    assert "claude agents have no attached mode" in exc.value.message
    assert "diverging history" in exc.value.message
    refused = app.cli("agent", "add", "other", "--provider", "claude-code")
    assert refused.returncode == 2
    assert b"claude" in refused.stderr


# --- what prepare decides ------------------------------------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize(("grants", "extra"), [
    ((), ()),
    (("send_message",), ("mcp__wardian__send_message",)),
    (("reply", "interrupt_agent", "followup_task", "send_message"),
     ("mcp__wardian__send_message", "mcp__wardian__followup_task", "mcp__wardian__reply",
      "mcp__wardian__interrupt_agent")),
    (("list_agents",), ()),
])
def test_reading_tools_always_run_and_the_others_only_when_granted(grants: tuple[str, ...],
                                                                 extra: tuple[str, ...]) -> None:
    assert set(allowed_tools(grants)) == {*ALWAYS, *extra}


@pytest.mark.fast
def test_an_unknown_grant_is_refused_before_anything_is_written() -> None:
    home = Home(short_home("wc"))
    with pytest.raises(errors.InvalidArguments) as exc:
        build(launch_spec(home, grants=("send_mesage",)))
    assert "send_mesage" in exc.value.message
    assert not (home.root / "agents").exists()


@pytest.mark.fast
def test_the_environment_has_the_private_dirs_and_the_agents_credential_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"ANTHROPIC_API_KEY": "sk-inherited-0001", "ANTHROPIC_AUTH_TOKEN": "tok-inherited-0002",
                        "ANTHROPIC_BASE_URL": "https://example.invalid", "CLAUDE_CODE_OAUTH_TOKEN": "inherited-0003",
                        "CLAUDECODE": "1", "CLAUDE_CONFIG_DIR": "/home/someone/.claude"}.items():
        monkeypatch.setenv(name, value)
    home = Home(short_home("wc"))
    spec = launch_spec(home, grants=("reply",), credentials=(
        Credential("codex", "default", CredentialKind.API_KEY, "sk-openai-not-this-one"),
        Credential("claude", "default", CredentialKind.API_KEY, API_KEY)))
    claude = build(spec)
    env = claude.env
    base = spec.agent_dir / "claude"
    assert env["CLAUDE_CONFIG_DIR"] == str(base / "config") == str(claude.config_dir)
    assert env["TMPDIR"] == env["CLAUDE_CODE_TMPDIR"] == str(base / "tmp")
    assert env["XDG_CACHE_HOME"] == str(base / "cache")
    assert env["XDG_RUNTIME_DIR"].startswith(str(home.run_dir))
    assert len(os.fsencode(env["XDG_RUNTIME_DIR"] + "/cc-socks/4194304.sock")) <= MAX_SOCKET_PATH_BYTES
    for variable in ("CLAUDE_CONFIG_DIR", "TMPDIR", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"):
        assert oct(Path(env[variable]).stat().st_mode & 0o777) == "0o700", variable
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["DISABLE_AUTOUPDATER"] == env["DISABLE_TELEMETRY"] == env["DISABLE_ERROR_REPORTING"] == "1"
    assert claude.credential == FdCredential("CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR", API_KEY)
    for gone in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN",
                 "CLAUDECODE", "WARDIAN_HOME", "WARDIAN_SESSION_ID"):
        assert gone not in env, gone
    assert API_KEY not in json.dumps(env)  # the sign-in goes on a file descriptor at each process start
    assert "inherited" not in json.dumps(env)
    assert claude.workspace == spec.workspace
    assert set(claude.allowed_tools) == {*ALWAYS, "mcp__wardian__reply"}
    assert claude.session_id is None
    assert claude.pid_path == spec.pid_path
    assert claude.stderr_path == spec.log_path
    assert_no_secret_under_agents(home, API_KEY)


@pytest.mark.fast
def test_an_oauth_token_is_given_on_the_oauth_token_descriptor() -> None:
    home = Home(short_home("wc"))
    token = "sk-ant-oat01-registration-test-token-1234"
    claude = build(launch_spec(home, credentials=(Credential("claude", "default", CredentialKind.OAUTH_TOKEN,
                                                             token),)))
    assert claude.credential == FdCredential("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", token)
    assert token not in repr(claude)
    assert "CLAUDE_CODE_OAUTH_TOKEN" not in claude.env
    assert "ANTHROPIC_API_KEY" not in claude.env
    assert_no_secret_under_agents(home, token)


@pytest.mark.fast
def test_a_secret_setting_reaches_the_environment_and_no_file() -> None:
    home = Home(short_home("wc"))
    claude = build(launch_spec(home, overrides=(f'env.ANTHROPIC_API_KEY="{API_KEY}"', 'model="claude-haiku-5"')))
    assert claude.env["ANTHROPIC_API_KEY"] == API_KEY
    assert json.loads((claude.config_dir / "settings.json").read_text(encoding="utf-8")) == {
        "model": "claude-haiku-5"}
    assert_no_secret_under_agents(home, API_KEY)


def assert_no_secret_under_agents(home: Home, secret: str) -> None:
    """Neither the secret nor its last 12 characters (what a masked copy might keep) is in a file under agents/."""
    for path in (home.root / "agents").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data, path
            assert secret[-12:].encode() not in data, path


@pytest.mark.fast
def test_the_mcp_config_is_private_and_registers_wardian_mcp_serve_for_the_session() -> None:
    home = Home(short_home("wc"))
    claude = build(launch_spec(home, session="sess-of-this-generation"))
    assert oct(claude.mcp_config.stat().st_mode & 0o777) == "0o600"
    assert claude.mcp_config.parent == claude.config_dir.parent
    entry = json.loads(claude.mcp_config.read_text(encoding="utf-8"))["mcpServers"]["wardian"]
    assert entry["type"] == "stdio"
    assert Path(entry["command"]).is_absolute()
    assert os.access(entry["command"], os.X_OK)
    assert entry["args"] == ["mcp", "serve"]
    assert entry["env"] == {"WARDIAN_HOME": str(home.root), "WARDIAN_SESSION_ID": "sess-of-this-generation"}


@pytest.mark.fast
def test_a_start_grants_exactly_the_grants_it_is_given() -> None:
    home = Home(short_home("wc"))
    build(launch_spec(home, grants=("send_message",)))
    # The app passes the grants it keeps with the agent at every start: other grants replace the earlier ones.
    again = build(launch_spec(home, grants=("reply",)))
    assert set(again.allowed_tools) == {*ALWAYS, "mcp__wardian__reply"}
    assert set(build(launch_spec(home)).allowed_tools) == set(ALWAYS)


@pytest.mark.fast
def test_a_long_home_gets_a_short_runtime_dir_for_the_socket() -> None:
    root = short_home("wc") / ("h" * 60)
    root.mkdir()
    home = Home(root)
    runtime = Path(build(launch_spec(home)).env["XDG_RUNTIME_DIR"])
    assert not str(runtime).startswith(str(home.root))
    assert len(os.fsencode(str(runtime) + "/cc-socks/4194304.sock")) <= MAX_SOCKET_PATH_BYTES
    assert runtime.parent.stat().st_uid == os.geteuid()
    assert oct(runtime.stat().st_mode & 0o777) == oct(runtime.parent.stat().st_mode & 0o777) == "0o700"


# --- the real Claude Code ------------------------------------------------------------------------------------------

def test_real_claude_connects_to_wardian_through_the_private_mcp_config(app: AppHandle) -> None:
    executable = claude_or_skip()
    agent, _ = app.add_agent("lead", "claude")
    session = app.call("agent/session", {"agent": "lead"})["session_id"]
    base_url = f"http://127.0.0.1:{closed_port()}/agents/lead"
    spec = launch_spec(app.home, session=session, overrides=(f'env.ANTHROPIC_BASE_URL="{base_url}"',),
                       credentials=(Credential("claude", "default", CredentialKind.API_KEY, API_KEY),))
    claude = build(spec, executable)
    argv = [executable, *STREAM, "--mcp-config", str(claude.mcp_config), "--strict-mcp-config",
            "--allowedTools", ",".join(claude.allowed_tools)]
    (spec.workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"project": {
        "type": "stdio", "command": "/bin/false"}}}), encoding="utf-8")
    with stream_json(argv, claude.env, spec.workspace, claude.credential) as cc:
        init = cc.control("initialize")
        assert init["claude_code_version"] == "2.1.328"
        assert init["account"]["apiKeySource"] == "ANTHROPIC_API_KEY"
        status = cc.server_status("wardian")
        assert status["status"] == "connected", status
        assert status["scope"] == "dynamic"
        names = {s["name"] for s in cc.control("mcp_status")["mcpServers"]}
        assert names == {"wardian"}  # --strict-mcp-config: the workspace's .mcp.json is not mixed in
    assert_no_secret_under_agents(app.home, API_KEY)
    assert agent["uuid"] in str(spec.agent_dir) or spec.agent_dir.exists()


def test_the_settings_base_url_reaches_claude_codes_api_client(app: AppHandle) -> None:
    """`-c env.ANTHROPIC_BASE_URL=…` in settings.json is where tests point an agent at the scripted model: the CLI
    sends its Messages requests to that URL with `/v1/messages` appended."""
    executable = claude_or_skip()
    seen: list[bytes] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.settimeout(60)
        base_url = f"http://127.0.0.1:{server.getsockname()[1]}/agents/lead"
        claude = build(launch_spec(app.home, overrides=(f'env.ANTHROPIC_BASE_URL="{base_url}"',
                                                        f'env.ANTHROPIC_API_KEY="{API_KEY}"')), executable)
        env = {**claude.env, "CLAUDE_CODE_MAX_RETRIES": "0"}
        proc = subprocess.Popen([executable, "-p", "hello", "--strict-mcp-config"], env=env, cwd=app.home.root,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(60)
                while b"\r\n\r\n" not in b"".join(seen):
                    seen.append(conn.recv(65536))
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    head = b"".join(seen).split(b"\r\n\r\n")[0].decode()
    assert head.startswith("POST /agents/lead/v1/messages?beta=true HTTP/1.1")
    assert f"x-api-key: {API_KEY}" in head.lower().replace(API_KEY.lower(), API_KEY)


def test_a_left_behind_process_is_ended_and_a_live_holder_of_the_session_is_refused(app: AppHandle) -> None:
    executable = claude_or_skip()
    first = str(uuid.uuid4())
    spec = launch_spec(app.home, thread_id=None, overrides=(f'env.ANTHROPIC_BASE_URL="http://127.0.0.1:{closed_port()}"',))
    claude = build(spec, executable)
    argv = [executable, *STREAM, "--strict-mcp-config"]
    with stream_json([*argv, "--session-id", first], claude.env, spec.workspace) as left:
        left.control("initialize")
        spec.pid_path.write_text(f"{left.proc.pid}\n", encoding="utf-8")  # as a killed app leaves it
        build(launch_spec(app.home, thread_id=first), executable)
        assert not psutil.pid_exists(left.proc.pid)  # ended, and waited for, before the start goes on
        assert not spec.pid_path.exists()
    second = str(uuid.uuid4())
    with stream_json([*argv, "--session-id", second], claude.env, spec.workspace) as by_hand:
        by_hand.control("initialize")
        with pytest.raises(errors.Unsupported) as exc:
            build(launch_spec(app.home, thread_id=second), executable)
        assert f"pid {by_hand.proc.pid}" in exc.value.message
        assert by_hand.proc.poll() is None  # not ours to end
        build(launch_spec(app.home, thread_id=first), executable)  # another session of the agent is free


# --- wardian claude register ---------------------------------------------------------------------------------------

USER_CLAUDE_JSON = {"firstStartTime": "2026-01-01T00:00:00.000Z", "projects": {"/srv/app": {"allowedTools": []}},
                    "mcpServers": {"docs": {"type": "stdio", "command": "docs-mcp", "args": ["--stdio"]}}}


def register(app: AppHandle, *args: str) -> subprocess.CompletedProcess[bytes]:
    return app.cli("claude", "register", *args)


def test_register_writes_our_entry_and_keeps_everything_else(app: AppHandle, tmp_path: Path) -> None:
    agent, _ = app.add_agent("reviewer", "claude")
    config_dir = tmp_path / "cc"
    config_dir.mkdir()
    (config_dir / ".claude.json").write_text(json.dumps(USER_CLAUDE_JSON), encoding="utf-8")
    out = register(app, "--config-dir", str(config_dir), "--agent", "reviewer", "--json")
    assert out.returncode == 0, out.stderr
    summary = orjson.loads(out.stdout)
    assert summary["created"] is True
    assert summary["approved_tools"] == []
    doc = json.loads((config_dir / ".claude.json").read_text(encoding="utf-8"))
    assert doc["projects"] == USER_CLAUDE_JSON["projects"]
    assert doc["mcpServers"]["docs"] == USER_CLAUDE_JSON["mcpServers"]["docs"]
    entry = doc["mcpServers"]["wardian"]
    assert entry["type"] == "stdio"
    assert entry["args"] == ["mcp", "serve"]
    assert os.access(entry["command"], os.X_OK)
    assert entry["env"]["WARDIAN_HOME"] == str(app.home.root)
    listed = app.call("agent/list", {"session": entry["env"]["WARDIAN_SESSION_ID"]})
    assert listed["caller"]["uuid"] == agent["uuid"]
    assert oct((config_dir / ".claude.json").stat().st_mode & 0o777) == "0o600"
    assert not (config_dir / "settings.json").exists()  # no grant asked, none written
    assert entry["env"]["WARDIAN_SESSION_ID"].encode() not in out.stdout + out.stderr
    plain = register(app, "--config-dir", str(config_dir), "--agent", "reviewer")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith(b"updated mcpServers.wardian for agent reviewer")
    assert b"claude mcp add --scope user wardian -e WARDIAN_HOME=" in plain.stdout
    assert b"agent env reviewer" in plain.stdout


def test_register_grants_become_allow_rules_in_settings_json(app: AppHandle, tmp_path: Path) -> None:
    app.add_agent("reviewer", "claude")
    config_dir = tmp_path / "cc"
    config_dir.mkdir()
    (config_dir / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(git:*)"]},
                                                          "model": "opus"}), encoding="utf-8")
    out = register(app, "--config-dir", str(config_dir), "--agent", "reviewer", "--approve-tools",
                   "reply,send_message")
    assert out.returncode == 0, out.stderr
    assert b"mcp__wardian__send_message, mcp__wardian__reply" in out.stdout
    doc = json.loads((config_dir / "settings.json").read_text(encoding="utf-8"))
    assert doc == {"permissions": {"allow": ["Bash(git:*)", "mcp__wardian__send_message", "mcp__wardian__reply"]},
                   "model": "opus"}
    assert register(app, "--config-dir", str(config_dir), "--agent", "reviewer", "--approve-tools",
                    "reply").returncode == 0
    again = json.loads((config_dir / "settings.json").read_text(encoding="utf-8"))
    assert again["permissions"]["allow"].count("mcp__wardian__reply") == 1


def test_register_without_a_config_dir_prints_the_claude_mcp_add_line(app: AppHandle) -> None:
    app.add_agent("reviewer", "claude")
    out = register(app, "--agent", "reviewer", "--approve-tools", "send_message")
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert text.startswith("equivalent command")
    assert "claude mcp add --scope user wardian" in text
    assert "mcp serve" in text
    assert '-e WARDIAN_SESSION_ID="$WARDIAN_SESSION_ID"' in text
    assert "--allowedTools mcp__wardian__send_message" in text
    summary = orjson.loads(register(app, "--agent", "reviewer", "--json").stdout)
    assert summary["config"] is None
    missing = register(app, "--agent", "nobody")
    assert missing.returncode == 4
    assert b"unknown_agent" in missing.stderr


def test_register_refuses_a_conflict_bad_input_and_the_persons_own_config(app: AppHandle, tmp_path: Path) -> None:
    app.add_agent("reviewer", "claude")
    config_dir = tmp_path / "cc"
    config_dir.mkdir()
    theirs = json.dumps({"mcpServers": {"wardian": {"type": "http", "url": "https://example.invalid/mcp"}}})
    (config_dir / ".claude.json").write_text(theirs, encoding="utf-8")
    out = register(app, "--config-dir", str(config_dir), "--agent", "reviewer")
    assert out.returncode == 2
    assert b"registration_conflict" in out.stderr
    assert (config_dir / ".claude.json").read_text(encoding="utf-8") == theirs
    (config_dir / ".claude.json").write_text("{ not json", encoding="utf-8")
    out = register(app, "--config-dir", str(config_dir), "--agent", "reviewer")
    assert out.returncode == 2
    assert b"not valid JSON" in out.stderr
    assert (config_dir / ".claude.json").read_text(encoding="utf-8") == "{ not json"
    out = register(app, "--config-dir", str(tmp_path / "new"), "--agent", "reviewer", "--approve-tools", "nope")
    assert out.returncode == 2
    assert b"names no wardian tool" in out.stderr
    assert not (tmp_path / "new").exists()
    missing = register(app, "--config-dir", str(tmp_path / "other"), "--agent", "nobody")
    assert missing.returncode == 4
    assert b"unknown_agent" in missing.stderr
    assert not (tmp_path / "other" / ".claude.json").exists()
    for own in (Path.home() / ".claude", Path.home()):
        refused = register(app, "--config-dir", str(own), "--agent", "reviewer")
        assert refused.returncode == 2
        assert b"own Claude Code config" in refused.stderr


def test_real_claude_loads_the_registered_entry_from_its_config_dir(app: AppHandle, tmp_path: Path) -> None:
    executable = claude_or_skip()
    app.add_agent("reviewer", "claude")
    config_dir = tmp_path / "cc"
    assert register(app, "--config-dir", str(config_dir), "--agent", "reviewer").returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "WARDIAN_", "CLAUDE"))}
    env.update(CLAUDE_CONFIG_DIR=str(config_dir), TMPDIR=str(tmp_path), XDG_RUNTIME_DIR=str(short_home("wr")),
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", ANTHROPIC_API_KEY=API_KEY,
               ANTHROPIC_BASE_URL=f"http://127.0.0.1:{closed_port()}")
    env.pop(ENV_CLAUDE, None)
    with stream_json([executable, *STREAM], env, tmp_path) as cc:
        cc.control("initialize")
        status = cc.server_status("wardian")
        assert status["status"] == "connected", status
        assert status["scope"] == "user"


# --- message show ---------------------------------------------------------------------------------------------------

def test_message_show_names_a_claude_tasks_session_and_message_uuid(app: AppHandle,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The story's shape is the app's own (`request/show`); its delivery facts are set as a submission to a Claude
    agent records them (the session id as the thread, the message uuid the app chose)."""
    from wardian.cli.message import _delivered_to
    from wardian.cli.records import print_story

    agent, _ = app.add_agent("reviewer", "claude")
    task = app.call("operator/followup", {"target": "reviewer", "message": "review it"})
    story = app.call("request/show", {"id": task["request_id"]})
    assert _delivered_to(story) is None  # not submitted yet: nothing to name
    session, message = str(uuid.uuid4()), str(uuid.uuid4())
    story["task"]["facts"].update(state="submitted", submitted_at=story["created_at"], thread_id=session,
                                  turn_id=message)
    story["task"]["provider_message_id"] = message
    assert _delivered_to(story) == agent["uuid"]
    print_story(story, "claude")
    shown = capsys.readouterr().out
    assert f"Claude Code session {session} turn {message}, message uuid {message}" in shown
    print_story(story, "codex")
    assert f"thread {session} turn {message}, provider message {message}" in capsys.readouterr().out


# --- an app-owned start -------------------------------------------------------------------------------------------

def test_an_app_started_claude_agent_has_its_secret_in_its_environment_only(app: AppHandle) -> None:
    """Through the app: `-c env.ANTHROPIC_API_KEY=…` reaches the process's environment, is masked in the agent's
    settings, and is neither in its command line nor on disk under agents/; a stop leaves nothing running."""
    pytest.importorskip("wardian.providers.claude.runtime", reason="the Claude Code runtime is not in this tree")
    claude_or_skip()
    agent, _ = app.add_agent("lead", "claude")
    config = [f'env.ANTHROPIC_API_KEY="{API_KEY}"', f'env.ANTHROPIC_BASE_URL="http://127.0.0.1:{closed_port()}"']
    started = app.call("agent/start", {"agent": "lead", "config": config, "approve_tools": ["reply"]},
                       timeout_s=300)
    assert started["provider_version"] == "2.1.328"
    pid = int(app.home.provider_pid_path("claude", agent["uuid"]).read_text(encoding="utf-8"))
    process = psutil.Process(pid)
    env = process.environ()
    assert env["ANTHROPIC_API_KEY"] == API_KEY
    assert env["CLAUDE_CONFIG_DIR"] == str(app.home.agent_dir(agent["uuid"]) / "claude" / "config")
    assert "CLAUDECODE" not in env
    cmdline = process.cmdline()
    assert not any(API_KEY in arg for arg in cmdline)
    assert "--strict-mcp-config" in cmdline
    assert any("mcp__wardian__reply" in arg for arg in cmdline)
    shown = app.cli("agent", "list", "--json")
    assert API_KEY.encode() not in shown.stdout
    settings = orjson.loads(shown.stdout)["managed"][agent["uuid"]]["settings"]
    assert "env.ANTHROPIC_API_KEY=********" in settings
    assert_no_secret_under_agents(app.home, API_KEY)
    app.call("agent/stop", {"agent": "lead"})
    assert not psutil.pid_exists(pid)
