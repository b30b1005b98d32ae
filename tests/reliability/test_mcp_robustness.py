"""The MCP server and the CLI under app crashes and host misbehaviour (docs/reliability.md rows D4 for MCP and the
CLI, M5 (c, d), M7). tests/mcp covers M1-M4, M5 (a, b), M6 and M8; tests/app/test_framing.py covers D4 for
the in-process client.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections import Counter
from contextlib import ExitStack, suppress
from pathlib import Path

import psutil
import pytest

from tests.conftest import short_home, wardian_cmd
from tests.mcp.mcp_harness import McpConnection, mcp_server, raw_server, serve_command, server_env
from tests.reliability.world import AppHandle, db_rows, poll, report, size, start_with, stop
from wardian.home import Home


class CountingProxy:
    """A control socket in a home of its own that forwards every byte to the real app's socket and counts the
    request frames (lines) clients write: the outside view of "exactly one request write per call"."""

    def __init__(self, upstream: Path) -> None:
        self.root = short_home("wx")
        self.home = Home(self.root)
        self.home.run_dir.mkdir(mode=0o700)
        self.upstream = upstream
        self.frames = 0
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(str(self.home.socket_path))
        os.chmod(self.home.socket_path, 0o600)  # as the app makes it: the client refuses a socket open to others
        self._listener.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self._listener.accept()
            except OSError:
                return
            up = socket.socket(socket.AF_UNIX)
            up.connect(str(self.upstream))
            threading.Thread(target=self._pump, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while chunk := src.recv(65536):
                if requests:
                    with self._lock:
                        self.frames += chunk.count(b"\n")
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()
        shutil.rmtree(self.root, ignore_errors=True)


def pair(app: AppHandle) -> tuple[str, str]:
    app.call("agent/add", {"name": "lead", "provider": "codex"})
    app.call("agent/add", {"name": "worker", "provider": "codex"})
    return (app.call("agent/session", {"agent": "lead"})["session_id"],
            app.call("agent/session", {"agent": "worker"})["session_id"])


@pytest.mark.parametrize("client", ["mcp send_message", "mcp followup_task", "cli message send", "cli message task"])
def test_d4_a_lost_answer_is_uncertain_after_exactly_one_request_write(root: Path, client: str) -> None:
    """D4: the app dies after COMMIT and before answering. The MCP tool returns isError with
    delivery "uncertain", the CLI exits 5; exactly one request frame crossed the socket (counted outside the
    client), and the store holds exactly one record."""
    app = start_with(root)
    lead, _ = pair(app)
    stop(app)
    app = start_with(root, {"WARDIAN_CRASHPOINT": "after_commit_before_reply_write"})
    proxy = CountingProxy(app.home.socket_path)
    text = f"once via {client}"
    try:
        kind, name = client.split(" ", 1)
        if kind == "mcp":
            with raw_server(server_env(str(proxy.root), lead)) as server:
                server.initialize()
                answer = server.request(1, "tools/call", {"name": name, "arguments": {"target": "worker",
                                                                                      "message": text}})
            result = answer["result"]
            assert result["isError"] is True
            assert result["structuredContent"]["error"]["delivery"] == "uncertain"
        else:
            env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
            env.update(WARDIAN_HOME=str(proxy.root), WARDIAN_SESSION_ID=lead)
            done = subprocess.run([*wardian_cmd(), *name.split(), "--to", "worker", text], env=env,
                                  capture_output=True, timeout=60)
            assert done.returncode == 5, done.stderr
            assert b"uncertain" in done.stderr
        assert app.proc.wait(30) == 137
    finally:
        stop(app)
        proxy.close()
    rows = db_rows(root, "SELECT count(*) FROM interactions WHERE body = ?", (text,))[0][0]
    report(f"D4 no_client_retry_on_uncertain {client}", rounds=1, replayed=proxy.frames - 1, duplicated=rows - 1)
    assert proxy.frames == 1
    assert rows == 1


# --- M5 (c, d): the host dies, or abandons the server without closing its stdin ----------------------------

HOST = r"""
import json, subprocess, sys
cmd = json.loads(sys.argv[1])
server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "host", "version": "0"}}}
server.stdin.write((json.dumps(init) + "\n").encode()); server.stdin.flush()
server.stdout.readline()
print(server.pid, flush=True)
sys.stdin.read()  # the host lives until the test closes this pipe or kills it; the server's stdin stays open
"""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_members(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and alive(p.pid):
                out.append(p.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return out


def spawn_host(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    host = subprocess.Popen([sys.executable, "-c", HOST, json.dumps(serve_command())], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert host.stdout is not None
    server_pid = int(host.stdout.readline())
    return host, server_pid


@pytest.fixture(scope="module")
def served(shared_app: AppHandle) -> tuple[AppHandle, str, str]:
    _, lead = shared_app.add_agent()
    worker_agent, _ = shared_app.add_agent()
    return shared_app, lead, worker_agent["name"]


def test_m5_killing_the_host_ends_the_server_and_leaves_no_process(served: tuple[AppHandle, str, str]) -> None:
    """M5 (c) [CI N=3, NIGHTLY 50]: SIGKILL of the host process closes the server's stdin;
    the server exits (stdin EOF), and 0 processes are left in the host's process group."""
    app, lead, _ = served
    rounds = size(3, 50)
    leftovers = 0
    for _ in range(rounds):
        host, server_pid = spawn_host(server_env(str(app.home.root), lead))
        assert alive(server_pid)
        host.kill()
        host.communicate(timeout=10)
        poll(lambda p=server_pid: not alive(p), "the orphaned server exited", attempts=500)
        leftovers += len(group_members(host.pid))
    report("M5 shutdown_and_orphans host_killed", rounds=rounds, leftovers=leftovers)
    assert leftovers == 0


def test_m5_an_abandoned_server_holds_nothing_exclusive(served: tuple[AppHandle, str, str]) -> None:
    """M5 (d): a host that abandons its server with stdin still open (https://github.com/openai/codex/issues/28361)
    leaves a live server that holds nothing exclusive: a 2nd and 3rd server for the same session send and receive
    correctly meanwhile; closing the abandoned host's pipes ends everything, 0 leftovers."""
    app, lead, worker_name = served
    host, server_pid = spawn_host(server_env(str(app.home.root), lead))
    try:
        with mcp_server(server_env(str(app.home.root), lead)) as second, \
                mcp_server(server_env(str(app.home.root), lead)) as third:
            a = second.ok("send_message", {"target": worker_name, "message": "from the second"})
            b = third.ok("followup_task", {"target": worker_name, "message": "from the third"})
            assert a["delivery"] == b["delivery"] == "admitted"
            assert third.ok("wait_agent", {"timeout_ms": 0})["timed_out"] in (True, False)
            assert alive(server_pid)  # still there, abandoned, harmless
    finally:
        host.communicate(timeout=10)  # closes the host's stdin: the host exits, and so does its server
    poll(lambda: not alive(server_pid), "the abandoned server exited once its host was gone", attempts=500)
    assert group_members(host.pid) == []


# --- M7: three servers on one session -------------------------------------------------------------------


def test_m7_three_servers_on_one_session_expose_each_task_once_and_accept_one_reply(
        shared_app: AppHandle) -> None:
    """M7: three `wardian mcp serve` processes with the same WARDIAN_SESSION_ID run a
    receive/reply workload concurrently: 0 tasks exposed as new work twice, every task exposed once, exactly
    one reply accepted per task (every other server's reply is already_completed), cursors stay consistent
    (one server's cursor acknowledges for the session, a repeated ack changes nothing)."""
    _, lead = shared_app.add_agent()
    worker_agent, worker = shared_app.add_agent()
    tasks = size(30, 300)
    rids = [shared_app.call("task/followup", {"session": lead, "target": worker_agent["name"],
                                              "message": f"task {i}"})["request_id"] for i in range(tasks)]
    exposed: Counter[str] = Counter()
    replies: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    lock = threading.Lock()
    failures: list[BaseException] = []

    def work(conn: McpConnection, others: list[McpConnection]) -> None:
        try:
            ack = None
            for _ in range(tasks * 3):
                page = conn.ok("receive_messages", {"limit": 3, **({"ack_cursor": ack} if ack else {})})
                mine = [r["request_id"] for r in page["records"] if r["new_work"]]
                with lock:
                    exposed.update(mine)
                for rid in mine:
                    conn.ok("reply", {"request_id": rid, "status": "done", "message": "done once"})
                    with lock:
                        replies[rid] += 1
                    for other in others:  # a competing reply from another server of the same session
                        error = other.error("reply", {"request_id": rid, "status": "done", "message": "again"})
                        with lock:
                            refused[error["code"]] += 1
                ack = page["cursor"] if page["records"] else None
                if not page["records"] and not page["more"]:
                    with lock:
                        if len(exposed) == tasks:
                            return
        except BaseException as exc:
            failures.append(exc)

    env = server_env(str(shared_app.home.root), worker)
    with ExitStack() as stack:
        conns = [stack.enter_context(mcp_server(env)) for _ in range(3)]
        threads = [threading.Thread(target=work, args=(c, [o for o in conns if o is not c])) for c in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
        assert not failures, failures
        # A cursor of one server acknowledges for the session; acknowledging it again changes nothing.
        page = conns[0].ok("receive_messages", {"limit": 100})
        if page["records"]:
            first = conns[1].ok("receive_messages", {"ack_cursor": page["cursor"], "limit": 1})
            again = conns[2].ok("receive_messages", {"ack_cursor": page["cursor"], "limit": 1})
            assert first["acked"] >= 0
            assert again["acked"] == 0
    duplicated = sum(n - 1 for n in exposed.values() if n > 1) + sum(n - 1 for n in replies.values() if n > 1)
    report("M7 three_instances_same_session", rounds=tasks, duplicated=duplicated)
    assert set(exposed) == set(rids)
    assert duplicated == 0
    assert set(refused) == {"already_completed"}
    stored = db_rows(shared_app.home.root, "SELECT count(*) FROM interactions WHERE kind = 'reply' AND request_id IN "
                     f"({','.join('?' * len(rids))})", tuple(rids))[0][0]
    assert stored == tasks
    assert shared_app.call("app/status")["pid"] == shared_app.pid  # the servers never stop the app
