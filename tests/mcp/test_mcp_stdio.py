"""The stdio transport of `wardian mcp serve`, spoken to line by line (docs/reliability.md rows M1, M2, M3, M5).

These are the process-boundary tests: what the SDK client never sends (malformed lines), what reaches the
real stdout, what the server leaves on disk, and how it ends.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import AppHandle
from tests.mcp.conftest import Peers
from tests.mcp.mcp_harness import RawServer, mcp_server, raw_server, serve_command, server_env
from wardian.protocol.tools import MAX_MCP_FRAME_BYTES, TOOL_NAMES

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


def _ping_after(server: RawServer, ping_id: int) -> list[dict[str, Any]]:
    """Send a ping and return every message that came before its answer (the answer must come)."""
    server.send({"jsonrpc": "2.0", "id": ping_id, "method": "ping"})
    before = []
    while True:
        message = server.read()
        if message.get("id") == ping_id and "result" in message:
            assert message["result"] == {}
            return before
        before.append(message)


CALL = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}'
MALFORMED: list[tuple[str, bytes, int | None, Any]] = [
    # (case, line without its newline, expected JSON-RPC error code or None for no answer, expected id)
    ("not-json", b"not json", PARSE_ERROR, None),
    ("truncated", b'{"jsonrpc":"2.0","id":1,', PARSE_ERROR, None),
    ("bom", b'\xef\xbb\xbf{"jsonrpc":"2.0","id":2,"method":"ping"}', PARSE_ERROR, None),
    ("invalid-utf8", b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"\xff\xfe"}}', PARSE_ERROR, None),
    ("nan", (CALL % (4, '{"name":"wait_agent","arguments":{"timeout_ms":NaN}}')).encode(), PARSE_ERROR, None),
    ("infinity", (CALL % (5, '{"name":"wait_agent","arguments":{"timeout_ms":Infinity}}')).encode(), PARSE_ERROR,
     None),
    ("deep-nesting", b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":' + b"[" * 10_000 + b"]" * 10_000
     + b"}}", PARSE_ERROR, 6),
    ("batch", b'[{"jsonrpc":"2.0","id":7,"method":"ping"}]', INVALID_REQUEST, None),
    ("missing-jsonrpc", b'{"id":8,"method":"ping"}', INVALID_REQUEST, 8),
    ("object-id", b'{"jsonrpc":"2.0","id":{},"method":"ping"}', INVALID_REQUEST, None),
    ("not-an-object", b"42", INVALID_REQUEST, None),
    ("params-null", (CALL % (9, "null")).encode(), INVALID_PARAMS, 9),
    ("missing-tool-name", (CALL % (10, '{"arguments":{}}')).encode(), INVALID_PARAMS, 10),
    ("unknown-tool", (CALL % (11, '{"name":"post_message","arguments":{}}')).encode(), INVALID_PARAMS, 11),
    ("unknown-method", b'{"jsonrpc":"2.0","id":12,"method":"tools/destroy"}', METHOD_NOT_FOUND, 12),
    ("notification-bad-method", b'{"jsonrpc":"2.0","method":"notifications/bogus"}', None, None),
    ("params-not-an-object", b'{"jsonrpc":"2.0","id":15,"method":"ping","params":[1]}', INVALID_REQUEST, 15),
    ("notification-params-not-an-object", b'{"jsonrpc":"2.0","method":"notifications/initialized","params":5}',
     INVALID_REQUEST, None),
    ("malformed-response", b'{"jsonrpc":"2.0","id":16,"result":1}', None, None),
    ("crlf", b'{"jsonrpc":"2.0","id":13,"method":"tools/list"}\r', None, None),
    ("over-the-line-cap", b'{"jsonrpc":"2.0","id":14,"method":"ping","params":{"x":"' + b"a" * (2 * 1024 * 1024)
     + b'"}}', INVALID_REQUEST, 14),
    ("over-the-line-cap-id-after-params", b'{"jsonrpc":"2.0","method":"ping","params":{"x":"' + b"a" * (2 * 1024 * 1024)
     + b'"},"id":17}', INVALID_REQUEST, None),
]


@pytest.fixture(scope="module")
def bare_server() -> Any:
    """One server with no home and no session: malformed lines need neither."""
    with raw_server(server_env()) as server:
        server.initialize()
        yield server


@pytest.mark.parametrize(("line", "code", "id_"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_line_gets_its_json_rpc_error_and_the_next_ping_is_answered(
        bare_server: RawServer, line: bytes, code: int | None, id_: Any) -> None:
    """M2: each malformed line gets its code in docs/guide/mcp-server.md (or, for a notification, nothing) and the
    server keeps serving."""
    ping_id = 1000 + len(bare_server.stdout_lines)
    bare_server.send_raw(line + b"\n")
    before = _ping_after(bare_server, ping_id)
    if code is None:
        assert all("error" not in m for m in before), before
        return
    errors = [m for m in before if "error" in m]
    assert len(errors) == 1, before
    assert errors[0]["error"]["code"] == code
    assert errors[0]["id"] == id_
    if len(line) > MAX_MCP_FRAME_BYTES:
        assert errors[0]["error"]["data"] == {"code": "message_too_large", "limit_bytes": MAX_MCP_FRAME_BYTES}


def test_a_call_over_the_line_cap_through_the_official_client_fails_at_once_with_message_too_large(
        peers: Peers) -> None:
    """A tools/call line over 1 MiB was answered with `id: null`, so the official client's call waited for its own
    timeout. Now the answer carries the request's id (read from the line's start) and the call fails with
    `message_too_large`; the client's read timeout is 5 s, so an unanswered call fails this test."""
    _, token = peers.app.add_agent()
    with mcp_server(server_env(str(peers.app.home.root), token)) as mcp:
        with pytest.raises(MCPError) as failed:
            mcp.call("send_message", {"target": peers.bob.name, "message": "a" * (2 * MAX_MCP_FRAME_BYTES)},
                     read_timeout_s=5)
        assert failed.value.code == INVALID_REQUEST
        assert failed.value.data == {"code": "message_too_large", "limit_bytes": MAX_MCP_FRAME_BYTES}
        assert mcp.ok("list_agents")["agents"]  # and the server keeps serving


def test_a_crlf_terminated_request_is_answered_normally(bare_server: RawServer) -> None:
    """M2: a CRLF line ending is accepted (CR is JSON whitespace)."""
    bare_server.send_raw(b'{"jsonrpc":"2.0","id":"crlf","method":"tools/list"}\r\n')
    answer = bare_server.read()
    assert answer["id"] == "crlf"
    assert len(answer["result"]["tools"]) == len(TOOL_NAMES)


def test_a_lone_surrogate_in_a_message_is_a_tool_error_invalid_text(peers: Peers) -> None:
    """B14: a lone surrogate via the "\\ud800" escape -> invalid_text (valid JSON, invalid text)."""
    _, token = peers.app.add_agent()
    with raw_server(server_env(str(peers.app.home.root), token)) as server:
        server.initialize()
        for tool in ("send_message", "followup_task"):
            server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s","arguments":'
                            b'{"target":"%s","message":"bad \\ud800 text"}}}\n' % (tool.encode(),
                                                                                    peers.bob.name.encode()))
            result = server.read()["result"]
            assert result["isError"] is True
            assert result["structuredContent"]["error"]["code"] == "invalid_text"


def test_a_lone_surrogate_in_a_target_is_invalid_text_naming_the_target(peers: Peers) -> None:
    """B14: a lone surrogate in `target` was refused as invalid_text without a field, called "not valid UTF-8" (the
    client's framing noticed it, not the target's check). Now the target's own check names the field."""
    _, token = peers.app.add_agent()
    with raw_server(server_env(str(peers.app.home.root), token)) as server:
        server.initialize()
        for tool in ("send_message", "followup_task", "interrupt_agent"):
            server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s","arguments":'
                            b'{"target":"bo\\udc80b","message":"hi"}}}\n' % tool.encode())
            error = server.read()["result"]["structuredContent"]["error"]
            assert (error["code"], error["field"]) == ("invalid_text", "target")
            assert "lone surrogate" in error["message"]


def test_every_stdout_line_is_json_rpc_even_when_modules_print_and_logging_is_verbose(
        peers: Peers, tmp_path: Path) -> None:
    """M1: every tool and error path, DEBUG logging, a module that prints on import -> 0 non-JSON lines on
    stdout; logs only on stderr."""
    # A module imported after startup (the MCP SDK) prints to stdout and writes to fd 1 directly.
    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys\n"
        "class _Noisy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mcp_types':\n"
        "            print('BANNER printed on import')\n"
        "            os.write(1, b'RAW banner on fd 1\\n')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Noisy())\n", encoding="utf-8")
    _, token = peers.app.add_agent()
    env = server_env(str(peers.app.home.root), token, WARDIAN_LOG_LEVEL="DEBUG", PYTHONPATH=str(tmp_path))
    with raw_server(env) as server:
        server.initialize()
        server.request(1, "tools/list")
        calls = {"wait_agent": {"timeout_ms": 0}, "send_message": {"target": peers.bob.name, "message": "hi"},
                 "followup_task": {"target": peers.bob.name, "message": "do"}, "receive_messages": {},
                 "reply": {"request_id": "ask_nope", "status": "done", "message": "x"},
                 "interrupt_agent": {"target": peers.bob.name}, "list_agents": {}}
        for n, (tool, arguments) in enumerate(calls.items()):
            server.request(10 + n, "tools/call", {"name": tool, "arguments": arguments})
            server.request(20 + n, "tools/call", {"name": tool, "arguments": {**arguments, "sender": "x"}})
        # Every tool call takes the quick path; an unknown tool is the SDK's, so its import (and the noise) happens.
        assert server.request(30, "tools/call", {"name": "no_such_tool", "arguments": {}})["error"]
        server.send_raw(b"not json\n")
        server.read()
        code, rest, stderr = server.close()
    assert code == 0
    lines = server.stdout_lines + [line for line in rest.split(b"\n") if line]
    assert len(lines) >= 2 + 2 * len(calls) + 2
    for line in lines:
        message = orjson.loads(line)
        assert message["jsonrpc"] == "2.0"
        assert ("result" in message) != ("error" in message)
    if not os.environ.get("WARDIAN_TEST_CLI"):  # a frozen executable ignores PYTHONPATH
        assert b"BANNER printed on import" in stderr
        assert b"RAW banner on fd 1" in stderr
    assert b"Traceback" not in stderr
    assert token.encode() not in stderr  # S6: the session secret is never logged


def _tree(root: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_mode, p.stat().st_mtime_ns) for p in root.rglob("*"))


@pytest.mark.parametrize("home", ["unset", "missing", "existing"])
def test_discovery_works_without_home_app_or_session_and_touches_no_file(tmp_path: Path, home: str) -> None:
    """MCP-2: protocol discovery works without launching or modifying a Wardian home; M3 (0 files)."""
    work = tmp_path / "cwd"
    work.mkdir()
    wardian_home = tmp_path / "home"
    if home == "existing":
        wardian_home.mkdir()
        (wardian_home / "note.txt").write_text("user file", encoding="utf-8")
    env = server_env(None if home == "unset" else str(wardian_home), None, HOME=str(work), TMPDIR=str(work))
    before = _tree(tmp_path)
    with raw_server(env, cwd=str(work)) as server:
        init = server.initialize()["result"]
        assert init["serverInfo"]["name"] == "wardian"
        assert "wait_agent" in init["instructions"]
        tools = server.request(1, "tools/list")["result"]["tools"]
        assert sorted(t["name"] for t in tools) == sorted(TOOL_NAMES)
        call = server.request(2, "tools/call", {"name": "list_agents", "arguments": {}})["result"]
        assert call["isError"] is True
        code, _, _ = server.close()
    assert code == 0
    assert _tree(tmp_path) == before


def _assert_group_gone(pgid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def test_the_server_exits_on_stdin_eof_even_while_a_wait_is_in_flight(peers: Peers) -> None:
    """M5 (a): closing stdin ends the server promptly, a 60 s wait_agent notwithstanding; 0 leftovers."""
    _, token = peers.app.add_agent()
    with raw_server(server_env(str(peers.app.home.root), token)) as server:
        server.initialize()
        assert server.request(1, "tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": 0}})["result"]
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "wait_agent", "arguments": {"timeout_ms": 60_000}}})
        code, _, stderr = server.close(timeout=20)
        assert code == 0, stderr
        _assert_group_gone(server.proc.pid)


def test_the_server_answers_requests_piped_before_eof_then_exits(tmp_path: Path) -> None:
    """M5 (a): requests already read when stdin ends are still answered (a grace), then the server exits."""
    with raw_server(server_env(), cwd=str(tmp_path)) as server:
        server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
                        b'"capabilities":{},"clientInfo":{"name":"pipe","version":"0"}}}\n'
                        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
                        b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
        code, rest, _ = server.close(timeout=20)
    assert code == 0
    answers = [orjson.loads(line) for line in rest.split(b"\n") if line]
    assert [a["id"] for a in answers] == [1, 2]
    assert len(answers[1]["result"]["tools"]) == len(TOOL_NAMES)


def test_the_server_exits_on_sigterm_and_leaves_no_process(app: AppHandle) -> None:
    """M5 (b): SIGTERM ends the server promptly, mid-wait, with nothing left in its process group."""
    _, token = app.add_agent()
    with raw_server(server_env(str(app.home.root), token)) as server:
        server.initialize()
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "wait_agent", "arguments": {"timeout_ms": 60_000}}})
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=20) == -signal.SIGTERM
        _assert_group_gone(server.proc.pid)
    assert app.proc.poll() is None  # the app is not the server's to stop



# The host: it starts the server on the pipes it is given, says the server's pid, and lives until it is killed.
PARENT = r"""
import json, subprocess, sys
cmd, stdin_fd, stdout_fd = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
server = subprocess.Popen(cmd, stdin=stdin_fd, stdout=stdout_fd, stderr=subprocess.DEVNULL, start_new_session=True)
print(server.pid, flush=True)
sys.stdin.read()
"""


def _live_members(pgid: int) -> list[int]:
    """The processes of group `pgid` that are alive (a zombie is not: it only waits to be reaped)."""
    live = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                live.append(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return live


def _read_to_eof(fd: int, timeout_s: float) -> bytes:
    """Everything readable from `fd` until every writer has closed it; fails if that takes over `timeout_s`."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"the pipe was still open after {timeout_s} s: {data[:500]!r}"
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return data
        data += chunk


def test_the_server_exits_when_its_parent_dies_while_another_process_holds_its_stdin(app: AppHandle) -> None:
    """M5 (c), decision 0007: the parent (host) is SIGKILLed while a third process (this test) keeps the server's
    stdin open, a 60 s wait in flight: the server notices its parent's death and exits by itself, writing nothing
    more, and no process is left in its group."""
    _, token = app.add_agent()
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    parent = subprocess.Popen([sys.executable, "-c", PARENT, json.dumps(serve_command()), str(stdin_r),
                               str(stdout_w)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=server_env(str(app.home.root), token), pass_fds=(stdin_r, stdout_w),
                              start_new_session=True)
    os.close(stdin_r)
    os.close(stdout_w)  # from now on the parent and the server are the only writers of stdout_r
    server_pid = None
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        os.write(stdin_w, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
                 b'"capabilities":{},"clientInfo":{"name":"host","version":"0"}}}\n'
                 b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        first = b""
        while b"\n" not in first:
            ready, _, _ = select.select([stdout_r], [], [], 30)
            assert ready, "no answer to initialize"
            first += os.read(stdout_r, 1 << 16)
        assert orjson.loads(first.split(b"\n")[0])["id"] == 0
        os.write(stdin_w, b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait_agent",'
                 b'"arguments":{"timeout_ms":60000}}}\n')
        parent.kill()
        parent.communicate(timeout=10)
        rest = _read_to_eof(stdout_r, 20)  # EOF: the server, the last writer, has exited
        assert first.count(b"\n") == 1
        assert rest == b""  # the wait, abandoned after the grace, wrote nothing
        assert _live_members(server_pid) == []
    finally:
        os.close(stdin_w)
        os.close(stdout_r)
        if parent.poll() is None:
            parent.kill()
            parent.communicate(timeout=10)
        if server_pid is not None and _live_members(server_pid):
            os.killpg(server_pid, signal.SIGKILL)
