"""The app on Windows (docs/guide/windows.md): started and stopped by the frozen `wardian-cli.exe` on a home it makes
private by ACL, its control channel a named pipe that admits this user alone, and the CLI's message commands and
the eight MCP tools (through `wardian-mcp.exe`) served by it."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.windows.conftest import DEADLINE_S, DIST, alive, pe_subsystem, poll, program, read_pid
from wardian import errors, pipes, winsec
from wardian.client import AppClient
from wardian.home import Home

CLI, LAUNCHER = DIST / "wardian-cli.exe", DIST / "wardian-mcp.exe"


def clean_env() -> dict[str, str]:
    """This process's environment without its own WARDIAN_* settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}


@dataclass
class RunningApp:
    home: Home
    pid: int

    def env(self, session: str | None = None) -> dict[str, str]:
        env = clean_env()
        env["WARDIAN_HOME"] = str(self.home.root)
        if session is not None:
            env["WARDIAN_SESSION_ID"] = session
        return env

    def cli(self, *args: str, session: str | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(CLI), *args], env=self.env(session), stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=DEADLINE_S, check=False)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        with AppClient(self.home) as client:
            return client.call(method, params)

    def add_agent(self, name: str) -> tuple[str, str]:
        """An agent registered (no provider runs for it) and a session token of its: (uuid, token)."""
        agent = self.call("agent/add", {"name": name, "provider": "codex"})
        return agent["uuid"], self.call("agent/session", {"agent": agent["uuid"]})["session_id"]


def start(home: Path, env: dict[str, str] | None = None) -> RunningApp:
    result = subprocess.run([str(CLI), "--home", str(home), "app", "start", "--json"], stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=DEADLINE_S * 2, check=False, env=env or clean_env())
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
    return RunningApp(Home(home), json.loads(result.stdout)["pid"])


@pytest.fixture
def app(tmp_path: Path) -> Iterator[RunningApp]:
    """An app started by `wardian-cli.exe app start` on a new home; stopped (or killed) at the end."""
    if not CLI.exists():
        pytest.fail(f"{CLI} is missing: scripts/windows.sh builds it before the tests run")
    running = start(tmp_path / "home")
    try:
        yield running
    finally:
        running.cli("app", "stop")
        if alive(running.pid):
            subprocess.run(["taskkill", "/F", "/PID", str(running.pid)], capture_output=True, check=False)


def test_the_cli_starts_and_stops_the_app_on_a_home_private_by_acl(app: RunningApp) -> None:
    """HOME-2 on Windows: the new home's DACL admits its owner alone; `app status` and `app stop` reach the app over
    its pipe, and the process is gone once stop returns."""
    me = winsec.user_sid()
    assert winsec.others_allowed(winsec.path_sddl(str(app.home.root)), me) == []
    status = app.cli("app", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["pid"] == app.pid
    stopped = app.cli("app", "stop")
    assert stopped.returncode == 0, stopped.stderr
    poll(lambda: not alive(app.pid), "the app exited")
    assert app.cli("app", "status").returncode != 0


def test_a_second_app_on_the_same_home_is_refused(app: RunningApp) -> None:
    """One app per home (the home lock, a byte lock on Windows): the second start fails with already_running."""
    again = app.cli("app", "start", "--json")
    assert again.returncode != 0
    assert b"already_running" in again.stdout + again.stderr


def test_message_commands_round_trip_a_task_and_its_reply_through_the_cli_exe(app: RunningApp) -> None:
    """docs/reference/cli.md: send, task, wait, receive and reply through `wardian-cli.exe`, acting for
    WARDIAN_SESSION_ID, against the app on Windows."""
    lead, tl = app.add_agent("lead")
    _, tr = app.add_agent("reviewer")
    sent = app.cli("message", "send", "--to", "reviewer", "--json", "fyi", session=tl)
    assert sent.returncode == 0, sent.stderr
    task = app.cli("message", "task", "--to", "reviewer", "--json", "please review", session=tl)
    assert task.returncode == 0, task.stderr
    rid = json.loads(task.stdout)["request_id"]
    assert app.cli("message", "wait", "--timeout-ms", "0", session=tr).returncode == 0
    page = json.loads(app.cli("message", "receive", "--json", session=tr).stdout)
    assert [(r["kind"], r["text"]) for r in page["records"]] == [("information", "fyi"), ("task", "please review")]
    acked = json.loads(app.cli("message", "receive", "--ack-cursor", page["cursor"], "--json", session=tr).stdout)
    assert acked["acked"] == 2
    replied = app.cli("message", "reply", rid, "--status", "done", "looks good", session=tr)
    assert replied.returncode == 0, replied.stderr
    got = json.loads(app.cli("message", "receive", "--json", "--timeout-ms", "5000", session=tl).stdout)
    assert [(r["kind"], r["request_id"], r["text"]) for r in got["records"]] == [("reply", rid, "looks good")]
    assert got["records"][0]["recipient"]["uuid"] == lead


def test_the_control_pipe_admits_this_user_alone(app: RunningApp) -> None:
    """The pipe's DACL, read back through a client's handle: protected, one entry, all access for the app's user."""
    me = winsec.user_sid()
    with AppClient(app.home) as client:
        stream = client.connect()
        assert isinstance(stream, pipes.PipeStream)
        sddl = winsec.handle_sddl(stream.handle)
    assert sddl.endswith(f"D:P(A;;GA;;;{me})"), sddl
    assert winsec.others_allowed(sddl, me) == []


def test_a_client_refuses_a_pipe_served_by_another_user(app: RunningApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME-5 on Windows: the client compares the serving process's token user with its own before it writes a byte.
    Wine has one user, so this client is made to believe it is another (the one OS fact patched); the app then
    served nothing for it."""
    before = app.call("agent/list")
    monkeypatch.setattr(winsec, "user_sid", lambda: "S-1-5-21-1-2-3-4242")
    with pytest.raises(errors.UntrustedSocket), AppClient(app.home) as client:
        client.call("agent/add", {"name": "never", "provider": "codex"})
    monkeypatch.undo()
    assert app.call("agent/list") == before


async def _use_the_eight_tools(env_lead: dict[str, str], env_reviewer: dict[str, str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def session_of(env: dict[str, str]) -> Any:
        return StdioServerParameters(command=str(LAUNCHER), args=["mcp", "serve"], env=env)

    with anyio.fail_after(DEADLINE_S * 4):
        async with stdio_client(await session_of(env_lead)) as (lr, lw), ClientSession(lr, lw) as lead, \
                stdio_client(await session_of(env_reviewer)) as (rr, rw), ClientSession(rr, rw) as reviewer:
            await lead.initialize()
            await reviewer.initialize()
            for name, session, args in (
                ("list_agents", lead, {}),
                ("send_message", lead, {"target": "reviewer", "message": "fyi"}),
                ("followup_task", lead, {"target": "reviewer", "message": "please review"}),
                ("wait_agent", reviewer, {"timeout_ms": 5000}),
                ("receive_messages", reviewer, {"limit": 10}),
            ):
                result = await session.call_tool(name, args)
                assert not result.is_error, (name, result.content)
                seen[name] = result.structured_content
            rid = seen["followup_task"]["request_id"]
            reply = await reviewer.call_tool("reply", {"request_id": rid, "status": "done", "message": "ok"})
            assert not reply.is_error, reply.content
            interrupt = await lead.call_tool("interrupt_agent", {"target": "reviewer"})
            seen["interrupt_agent"] = interrupt
            seen["answer_approval"] = await lead.call_tool("answer_approval",
                                                           {"approval_id": "apr_0", "decision": "allow"})
            got = await lead.call_tool("receive_messages", {"timeout_ms": 5000})
            seen["reply"] = got.structured_content
    return seen


def test_the_eight_mcp_tools_reach_the_app_through_the_launcher(app: RunningApp) -> None:
    """MCP-1 on Windows: the official client drives `wardian-mcp.exe mcp serve` for two agents; every tool reaches
    the app over its pipe (interrupt_agent answers not_active: no provider runs for the reviewer; answer_approval
    unknown_approval: nobody asked)."""
    _, tl = app.add_agent("lead")
    _, tr = app.add_agent("reviewer")
    seen = anyio.run(_use_the_eight_tools, app.env(tl), app.env(tr))
    assert {a["name"] for a in seen["list_agents"]["agents"]} == {"lead", "reviewer"}
    assert [r["kind"] for r in seen["receive_messages"]["records"]] == ["information", "task"]
    assert seen["interrupt_agent"].is_error
    assert "not_active" in str(seen["interrupt_agent"].content)
    assert seen["answer_approval"].is_error
    assert "unknown_approval" in str(seen["answer_approval"].content)
    assert [(r["kind"], r["text"]) for r in seen["reply"]["records"]] == [("reply", "ok")]


def test_an_app_killed_outright_leaves_none_of_its_agents_trees_running(tmp_path: Path, strays: list[int]) -> None:
    """An agent's provider tree lives in a kill-on-close Job Object the app holds (providers/tree.py): the app
    itself, killed with TerminateProcess while it starts an agent, leaves no process of the tree running, its
    DETACHED_PROCESS grandchild included. The provider is a stand-in for Codex (`codex_standin.py` behind a .cmd,
    so the tree is cmd.exe, python.exe and the grandchild): no real provider runs under Wine."""
    tree = tmp_path / "tree"
    tree.mkdir()
    codex = tmp_path / "codex.cmd"
    codex.write_text(f'@"{sys.executable}" "{program("codex_standin.py")}" %*\r\n', encoding="utf-8")
    env = clean_env() | {"WARDIAN_CODEX": str(codex), "STANDIN_DIR": str(tree)}
    app = start(tmp_path / "home", env)
    strays.append(app.pid)
    worker, _ = app.add_agent("worker")
    outcome: list[BaseException | None] = []

    def start_agent() -> None:
        try:
            app.call("agent/start", {"agent": worker})
            outcome.append(None)
        except BaseException as exc:  # whatever ends the call once its app is killed
            outcome.append(exc)

    starter = threading.Thread(target=start_agent, daemon=True)
    starter.start()
    leader, grandchild = read_pid(tree / "child.pid"), read_pid(tree / "grandchild.pid")
    strays += [leader, grandchild]
    assert alive(leader)
    assert alive(grandchild)
    assert not outcome, outcome  # the start still waits for the stand-in's answer: the app holds the tree
    psutil.Process(app.pid).kill()
    poll(lambda: not alive(app.pid), "the app was killed")
    poll(lambda: not alive(leader) and not alive(grandchild), "the agent's tree ended with the app")
    starter.join(DEADLINE_S)
    assert isinstance(outcome[0], errors.WardianError), outcome


def peer_closed(stream: pipes.PipeStream) -> bool:
    """Whether the app closed its end of `stream` (a zero-byte peek fails once it has), read without writing."""
    try:
        pipes._winapi.PeekNamedPipe(stream.handle, 0)
    except OSError:
        return True
    return False


def test_an_idle_pipe_the_app_closed_costs_its_client_a_new_connection_never_an_uncertain_call(
        app: RunningApp) -> None:
    """R4 on Windows (docs/reliability.md): an `AppClient` kept open between calls and the MCP server's pool; the app
    closes their idle pipe connections at its idle bound; each next call is written once, on a new connection, and
    answered: the write into the closed pipe fails before a byte leaves (`ERROR_NO_DATA`)."""
    from wardian.mcp._calls import AppConnections

    with AppClient(app.home) as client:
        pool = AppConnections(app.home)
        try:
            assert client.call("agent/list")["agents"] == []
            assert pool.call("agent/list", {})["agents"] == []
            first = client.connect()
            assert isinstance(first, pipes.PipeStream)
            # Opened after both went idle, so closed at the bound no earlier than they are.
            later = pipes.connect(pipes.pipe_name(app.home.root), DEADLINE_S)
            try:
                poll(lambda: peer_closed(later), "a silent pipe connection stayed open")
            finally:
                later.close()
            assert peer_closed(first)
            assert client.call("agent/add", {"name": "after", "provider": "codex"})["name"] == "after"
            assert client.requests_written == 2
            assert client.connect() is not first
            assert [a["name"] for a in pool.call("agent/list", {})["agents"]] == ["after"]
        finally:
            pool.close()


def test_a_kept_pipe_connection_quiet_for_half_the_idle_bound_is_replaced_before_a_request_is_written(
        app: RunningApp) -> None:
    """The app closes a pipe connection idle for its bound whole, so a request crossing that close would be lost and
    reported uncertain (docs/guide/windows.md): a kept connection quiet for half the bound is not written on; the
    next call, and a pooled wait (whose exchange attaches its connection first), go on new connections, answered."""
    from wardian.client import _PIPE_REUSE_S
    from wardian.mcp._calls import AppConnections, WaitExchange

    _, token = app.add_agent("waiter")
    with AppClient(app.home) as client:
        pool = AppConnections(app.home)
        try:
            assert client.call("agent/list")["agents"]
            pool.call("mailbox/wait", {"session": token, "timeout_ms": 0}, 0, WaitExchange())
            first, quiet_from = client.connect(), time.monotonic()
            pooled = pool._idle[0].connect()  # the connection the pool keeps for its next call
            poll(lambda: time.monotonic() - quiet_from >= _PIPE_REUSE_S, "half the idle bound passed")
            assert isinstance(first, pipes.PipeStream)
            assert not peer_closed(first)  # still open at the app: the old code would have written on it
            assert client.call("agent/list")["agents"]
            assert client.connect() is not first
            assert client.requests_written == 2
            answer = pool.call("mailbox/wait", {"session": token, "timeout_ms": 0}, 0, WaitExchange())
            assert answer["timed_out"]
            assert pool._idle[0].connect() is not pooled
        finally:
            pool.close()


def app_log(home: Home) -> str:
    return (home.log_dir / "app.log").read_text(encoding="utf-8")


def test_the_app_log_names_the_control_pipe_it_serves(app: RunningApp) -> None:
    """The readiness line of `logs/app.log` names the channel clients reach: on Windows the named pipe, not the
    `run\\app.v1.sock` path no file is ever made at."""
    ready = [line for line in app_log(app.home).splitlines() if "app ready" in line]
    assert len(ready) == 1, ready
    assert pipes.pipe_name(app.home.root) in ready[0]
    assert "app.v1.sock" not in ready[0]


def test_a_first_start_makes_run_and_logs_private_without_saying_they_were_open(app: RunningApp) -> None:
    """HOME-2 on Windows: a new home's `run/` and `logs/` are private (their DACLs admit this user alone) and the log
    reports nothing tightened, since nothing was open before (Wine gives a new folder a DACL from its mode bits
    instead of inheriting; docs/guide/windows.md). A `run/` found open on a later start is tightened and reported."""
    me = winsec.user_sid()
    for path in (app.home.root, app.home.run_dir, app.home.log_dir):
        assert winsec.others_allowed(winsec.path_sddl(str(path)), me) == [], path
    assert "made these paths of the home private" not in app_log(app.home)
    assert app.cli("app", "stop").returncode == 0
    poll(lambda: not alive(app.pid), "the app exited")
    open_to_everyone(app.home.run_dir)
    assert winsec.others_allowed(winsec.path_sddl(str(app.home.run_dir)), me) == ["WD"]
    again = start(app.home.root)
    app.pid = again.pid
    tightened = [line for line in app_log(app.home).splitlines() if "made these paths of the home private" in line]
    assert len(tightened) == 1, tightened
    assert str(app.home.run_dir) in tightened[0]
    assert str(app.home.log_dir) not in tightened[0]
    assert winsec.others_allowed(winsec.path_sddl(str(app.home.run_dir)), me) == []


def open_to_everyone(path: Path) -> None:
    """Give the folder `path` a DACL that lets Everyone read it, besides its owner."""
    advapi32 = ctypes.WinDLL("advapi32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    descriptor = ctypes.c_void_p()
    sddl = f"D:P(A;OICI;FA;;;{winsec.user_sid()})(A;OICI;FR;;;WD)"
    assert advapi32.ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl, 1, ctypes.byref(descriptor), None)
    assert advapi32.SetFileSecurityW(str(path), 4 | 0x80000000, descriptor)  # DACL, protected


def test_starting_an_agent_registers_the_silent_launcher_in_its_private_codex_home(
        tmp_path: Path, strays: list[int]) -> None:
    """CFG-5 (docs/design/contract.md): an app run from `wardian-cli.exe` registers `wardian-mcp.exe`, the GUI launcher
    beside it, with `mcp serve`, in the agent's own CODEX_HOME. The provider is the Codex stand-in (no Codex runs
    under Wine); registration is written before it starts. `app stop` then ends the agent's whole tree."""
    tree = tmp_path / "tree"
    tree.mkdir()
    codex = tmp_path / "codex.cmd"
    codex.write_text(f'@"{sys.executable}" "{program("codex_standin.py")}" %*\r\n', encoding="utf-8")
    app = start(tmp_path / "home", clean_env() | {"WARDIAN_CODEX": str(codex), "STANDIN_DIR": str(tree)})
    strays.append(app.pid)
    worker, _ = app.add_agent("worker")

    def start_agent() -> None:
        with contextlib.suppress(errors.WardianError):  # the stand-in never answers: the stop ends the start
            app.call("agent/start", {"agent": worker})

    starter = threading.Thread(target=start_agent, daemon=True)
    starter.start()
    leader, grandchild = read_pid(tree / "child.pid"), read_pid(tree / "grandchild.pid")
    strays += [leader, grandchild]
    config = tomllib.loads((app.home.agent_dir(worker) / "codex" / "config.toml").read_text(encoding="utf-8"))
    server = config["mcp_servers"]["wardian"]
    assert Path(server["command"]).name == "wardian-mcp.exe"
    assert Path(server["command"]).samefile(LAUNCHER)
    assert server["args"] == ["mcp", "serve"]
    assert pe_subsystem(server["command"]) == 2  # Windows GUI: no console window per Codex server start
    assert app.cli("app", "stop").returncode == 0
    poll(lambda: not alive(app.pid), "the app stopped")
    poll(lambda: not alive(leader) and not alive(grandchild), "the agent's tree ended with the app's stop")
    starter.join(DEADLINE_S)


def test_an_empty_home_folder_open_to_others_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    """HOME-2 on Windows: an existing empty folder whose DACL lets Everyone in is refused with `insecure_home`; the app
    does not start and the folder is left as it was (no marker, no run/, its DACL unchanged)."""
    home = tmp_path / "home"
    home.mkdir()
    open_to_everyone(home)
    before = winsec.path_sddl(str(home))
    result = subprocess.run([str(CLI), "--home", str(home), "app", "start", "--json"], stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=DEADLINE_S * 2, check=False, env=clean_env())
    assert result.returncode != 0
    assert b"insecure_home" in result.stdout + result.stderr
    assert list(home.iterdir()) == []
    assert winsec.path_sddl(str(home)) == before
