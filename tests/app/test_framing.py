"""The control socket's framing: malformed frames get a JSON-RPC error and the connection goes on."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
from typing import Any

import pytest

from tests.conftest import AppHandle, short_home, start_app, stop_app
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home
from wardian.model import MAX_REQUEST_FRAME_BYTES

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


class Raw:
    def __init__(self, app: AppHandle) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(str(app.home.socket_path))
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def ping(self) -> None:
        self.send(b'{"jsonrpc":"2.0","id":"ping","method":"app/status"}\n')
        assert self.read()["result"]["running"] is True


@pytest.fixture
def raw(shared_app: AppHandle):
    r = Raw(shared_app)
    yield r
    r.sock.close()


@pytest.mark.parametrize(("frame", "code"), [
    (b"not json", -32700),
    (b'{"jsonrpc":"2.0","id":1,', -32700),
    (b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"app/status"}', -32700),
    (b'\xff\xfe{"jsonrpc":"2.0"}', -32700),
    (b'{"jsonrpc":"2.0","id":1,"method":"app/status","params":{"x":NaN}}', -32700),
    (b'{"jsonrpc":"2.0","id":1,"method":"app/status","params":{"x":Infinity}}', -32700),
    (b"[" * 10000 + b"]" * 10000, -32700),
    (b'[{"jsonrpc":"2.0","id":1,"method":"app/status"}]', -32600),
    (b'{"id":1,"method":"app/status"}', -32600),
    (b'{"jsonrpc":"2.0","id":{},"method":"app/status"}', -32600),
    (b'{"jsonrpc":"2.0","id":true,"method":"app/status"}', -32600),
    (b'{"jsonrpc":"2.0","id":1}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"no/such"}', -32601),
    (b'{"jsonrpc":"2.0","id":1,"method":"agent/list","params":[1]}', -32001),
])
def test_malformed_frames_get_an_error_and_the_connection_continues(raw: Raw, frame: bytes, code: int) -> None:
    """M2 (docs/guide/mcp-server.md#errors): the documented code for each case, then a ping is answered."""
    raw.send(frame + b"\n")
    answer = raw.read()
    assert answer["error"]["code"] == code
    raw.ping()


def test_crlf_line_endings_are_accepted(raw: Raw) -> None:
    """M2: a CRLF-terminated request is served."""
    raw.send(b'{"jsonrpc":"2.0","id":7,"method":"app/status"}\r\n')
    assert raw.read()["id"] == 7


def test_notifications_get_no_answer(raw: Raw) -> None:
    """JSON-RPC 2.0: a request without an id is a notification and is not answered."""
    raw.send(b'{"jsonrpc":"2.0","method":"app/status"}\n')
    raw.ping()  # the next answer is the ping's, not the notification's


def test_an_oversize_frame_is_refused_and_discarded_to_its_newline(raw: Raw) -> None:
    """B27: a line over the cap gets -32600, then the connection goes on."""
    raw.send(b'{"jsonrpc":"2.0","id":1,"method":"app/status","pad":"' + b"x" * (MAX_REQUEST_FRAME_BYTES + 10))
    raw.send(b'"}\n')
    assert raw.read()["error"]["code"] == -32600
    raw.ping()


def test_a_lone_surrogate_is_invalid_text_not_a_crash(shared_app: AppHandle, raw: Raw) -> None:
    r"""B14: a lone surrogate via "\ud800" is invalid_text; nothing is stored."""
    _, ta = shared_app.add_agent()
    b, _ = shared_app.add_agent()
    frame = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "message/send",
                        "params": {"session": ta, "target": b["name"], "message": "a\ud800b"}})
    raw.send(frame.encode("ascii") + b"\n")
    answer = raw.read()
    assert answer["error"]["data"]["code"] == "invalid_text"
    assert answer["error"]["data"]["delivery"] == "not_admitted"
    raw.ping()


def test_errors_carry_code_field_allowed_and_delivery(shared_app: AppHandle, raw: Raw) -> None:
    """docs/guide/mcp-server.md#errors: error data is {code, message, field?, allowed?, delivery}."""
    _, tb = shared_app.add_agent()
    raw.send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "mailbox/receive",
                         "params": {"session": tb, "limit": 500}}).encode() + b"\n")
    data = raw.read()["error"]["data"]
    assert data["code"] == "invalid_limit"
    assert data["field"] == "limit"
    assert "1..100" in data["allowed"]
    assert data["delivery"] == "not_admitted"


def test_a_lost_answer_is_uncertain_and_never_resent() -> None:
    """D4: the app dies after COMMIT but before answering; the client wrote exactly one
    request, reports uncertain, and the store holds exactly one record."""
    root = short_home("wu")
    try:
        proc = start_app(root)
        home = Home(root)
        with AppClient(home) as c:
            c.call("agent/add", {"name": "a", "provider": "codex"})
            c.call("agent/add", {"name": "b", "provider": "codex"})
            token = c.call("agent/session", {"agent": "a"})["session_id"]
        stop_app(proc)
        proc = start_app(root, {"WARDIAN_CRASHPOINT": "after_commit_before_reply_write"})
        client = AppClient(home)
        with pytest.raises(errors.DeliveryUncertain) as exc:
            client.call("message/send", {"session": token, "target": "b", "message": "once"})
        assert exc.value.delivery == "uncertain"
        assert client.requests_written == 1
        client.close()
        proc.wait(10)
        stop_app(proc)
        conn = sqlite3.connect(root / "wardian.db")
        assert conn.execute("SELECT count(*) FROM interactions WHERE body = 'once'").fetchone()[0] == 1
        conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_kept_connection_the_app_closed_is_replaced_and_the_request_written_once() -> None:
    """UNC-1 (never resend what may have been read): a client that kept its connection while the app closed it (here
    the app restarted; the app also closes connections left idle) finds it closed before writing a byte, and sends its
    request once on a new connection."""
    root = short_home("wk")
    try:
        proc = start_app(root)
        with AppClient(Home(root)) as client:
            client.call("agent/add", {"name": "before", "provider": "codex"})
            kept = client.connect()
            stop_app(proc)
            proc = start_app(root)
            assert client.call("agent/add", {"name": "after", "provider": "codex"})["name"] == "after"
            assert client.requests_written == 2
            assert client.connect() is not kept
            assert {a["name"] for a in client.call("agent/list")["agents"]} == {"before", "after"}
        stop_app(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)
