"""The P3 fuzz target (docs/reliability.md row P3): the stdio frame decoder and dispatcher of `wardian mcp serve`, in
process, against a fake app.

One input is the bytes a host writes to the server's standard input. `Target.one_input` runs them through a fresh
`StdioServer` (the line splitter, `decode_line`, the constant-answer `Front`, the SDK session and the tool calls)
whose app is `FakeApp`, waits until every request is answered, ends the stream (EOF) and checks the pass criteria:

- no uncaught exception: none escapes `deliver`, no thread dies of one, nothing is logged at ERROR or above, and
  the connection leaves no resource open (a ResourceWarning);
- every output is exactly one JSON-RPC response on one line (no notification, no request, no partial line);
- each request gets exactly one response with its id, each malformed line exactly one error (with the id the
  decoder recovered, or null), and a notification, a host's response or a blank line gets none. The one exception
  is the protocol's: a request the host cancels (`notifications/cancelled`) may go unanswered (MCP: "the
  receiver SHOULD NOT send a response for the cancelled request").

A failure raises `FrameFault`. `scripts/fuzz_mcp_frames.py` runs this under Atheris ([NIGHTLY]);
`tests/reliability/test_fuzz_mcp_frames.py` runs the seeds and random bytes without it ([CI]).

Why a fake app and not the real one (measured: docs/reliability.md, P3): the subject is the MCP server's framing and
dispatch, and the real app costs what the subject does not need. A `wait_agent` or `receive_messages` with
`timeout_ms` up to 60,000 really waits on an empty mailbox, so one fuzzed input could hold the fuzzer for a
minute; every accepted send is an fsynced commit that stays in the store, so inputs stop being independent and
the store grows for the whole run; and the app is a second process, not in-process. The fake speaks the real
wire format (NDJSON JSON-RPC on the home's Unix socket, the same error objects), validates params with the app's
own `parse_params`, and answers at once.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import shutil
import socket
import sys
import tempfile
import threading
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from wardian import errors
from wardian.home import ENV_HOME, ENV_SESSION, Home
from wardian.mcp._frames import FrameError, decode_line
from wardian.mcp._stdio import LineSplitter
from wardian.mcp.server import StdioServer
from wardian.protocol.jsonrpc import error_object
from wardian.protocol.methods import parse_params

# How long the target waits for the answers it expects (they take milliseconds); longer is a failure.
ANSWER_TIMEOUT_S = 30.0
# Read sizes the stream is cut into, one per input (chosen by its length), so lines straddle reads.
CHUNK_SIZES = (1, 2, 3, 7, 64, 4096, 65536)
# Argument values that make the fake app misbehave, so the server's uncertain paths are reached too.
DROP, GARBAGE, NOT_AN_OBJECT = "fuzz-drop", "fuzz-garbage", "fuzz-not-an-object"

_CANNED: dict[str, Any] = {
    "mailbox/wait": {"woke": False, "timed_out": True, "wake_reason": None},
    "mailbox/receive": {"records": [], "cursor": None, "acked": 0, "more": False, "timed_out": False,
                        "wake_reason": None},
    "message/send": {"id": "msg_fuzz", "kind": "information", "delivery": "admitted"},
    "task/followup": {"id": "ask_fuzz", "request_id": "ask_fuzz", "kind": "task", "delivery": "admitted"},
    "task/reply": {"id": "rep_fuzz", "request_id": "ask_fuzz", "status": "done", "delivery": "admitted"},
    "agent/interrupt": {"target": {"name": "bob"}, "turn_id": "turn_fuzz", "requested": True},
    "agent/list": {"agents": [], "caller": None},
}


class FrameFault(AssertionError):
    """A P3 pass criterion failed for one input."""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


class FakeApp:
    """The control socket of an app, as the MCP server sees it: a home of its own whose `run/app.v1.sock` speaks
    NDJSON JSON-RPC, validates params with the app's `parse_params` and answers every request at once (one thread,
    one selector)."""

    def __init__(self, parent: Path = Path("/tmp")) -> None:
        # A short path (under /tmp by default): a Unix socket's address is at most 108 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="wfz", dir=parent))
        self.home = Home(self.root)
        self.home.run_dir.mkdir(mode=0o700)
        self.requests = 0
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.home.socket_path))
        os.chmod(self.home.socket_path, 0o600)  # as the app makes it: the client refuses a socket open to others
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._closing = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._serve, name="fake-app", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closing = True
        self._wake_w.send(b"x")
        self._thread.join(10)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()
        self._wake_w.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _serve(self) -> None:
        while not self._closing:
            for key, _ in self._selector.select():
                if key.fileobj is self._listener:
                    conn, _ = self._listener.accept()
                    self._selector.register(conn, selectors.EVENT_READ, bytearray())
                elif key.fileobj is not self._wake_r:
                    self._read(key.fileobj, key.data)  # type: ignore[arg-type]

    def _read(self, conn: socket.socket, buf: bytearray) -> None:
        try:
            chunk = conn.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(conn)
            return
        buf += chunk
        while (nl := buf.find(b"\n")) >= 0:
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            answer = self.answer(line)
            if answer is None:
                self._drop(conn)
                return
            try:
                conn.sendall(answer)
            except OSError:
                self._drop(conn)
                return

    def _drop(self, conn: socket.socket) -> None:
        self._selector.unregister(conn)
        conn.close()

    def answer(self, line: bytes) -> bytes | None:
        """The answer line to one request line, or None to close the connection without one."""
        self.requests += 1
        request = orjson.loads(line)  # the server's own client wrote it: anything else is a harness bug
        id_, method, params = request["id"], request["method"], request.get("params")
        strings = _strings(params)
        if DROP in strings:
            return None
        if GARBAGE in strings:
            return b"{not json\n"
        try:
            parse_params(method, params)
        except errors.WardianError as exc:
            return orjson.dumps({"jsonrpc": "2.0", "id": id_, "error": error_object(exc)}) + b"\n"
        result: Any = [] if NOT_AN_OBJECT in strings else _CANNED.get(method, {})
        return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": result}) + b"\n"


class _Output:
    """What the server writes: one entry per `write` call, and the ids of the responses so far."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.ids: Counter[str] = Counter()
        self._changed = threading.Condition()

    def write(self, data: bytes) -> None:
        with self._changed:
            self.writes.append(bytes(data))
            try:
                message = json.loads(data)
            except ValueError:
                message = None
            if isinstance(message, dict) and "id" in message:
                self.ids[_key(message["id"])] += 1
            self._changed.notify_all()

    def wait_for(self, expected: Counter[str], timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: not expected - self.ids, timeout_s)


class _Faults(logging.Handler):
    """Records at ERROR or above, from any logger and thread (the server logs every exception it catches)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        self.records.append(text)


def _key(id_: Any) -> str:
    """A response id as a counter key: 1 and "1" are different ids."""
    return json.dumps(id_)


def _strict_json(line: bytes) -> Any:
    def constant(name: str) -> Any:
        raise ValueError(name)

    return json.loads(line.decode("utf-8"), parse_constant=constant)


def expected_answer(line: bytes) -> tuple[str, Any] | None:
    """What one stdin line must get: ("error", id) for a malformed line, ("answer", id) for a request, else None.

    Raises:
        FrameFault: the decoder calls a well-formed request something else.
    """
    try:
        message = decode_line(line)
    except FrameError as exc:
        return "error", exc.id
    if message is not None and "id" in message and "method" in message:
        return "answer", message["id"]
    # Cross-check without the decoder: a line the standard library reads as a JSON-RPC request is one.
    try:
        plain = _strict_json(line)
    except (ValueError, RecursionError):
        return None
    if (isinstance(plain, dict) and plain.get("jsonrpc") == "2.0" and isinstance(plain.get("method"), str)
            and (isinstance(plain.get("id"), str) or type(plain.get("id")) is int)):
        raise FrameFault(f"the decoder did not take a request for one: {line[:200]!r} -> {message!r}")
    return None


def _cancelled(line: bytes) -> str | None:
    """The request id a `notifications/cancelled` line names, if it is one."""
    try:
        message = decode_line(line)
    except FrameError:
        return None
    if (message is None or "id" in message or message.get("method") != "notifications/cancelled"
            or not isinstance(message.get("params"), dict)):
        return None
    request_id = message["params"].get("requestId")
    return _key(request_id) if isinstance(request_id, str | int) else None


def check_output(writes: list[bytes], expected: Counter[str], cancelled: Counter[str]) -> None:
    """The output criteria of P3 (see the module docstring).

    Raises:
        FrameFault: with what was wrong.
    """
    answered: Counter[str] = Counter()
    for data in writes:
        if not data.endswith(b"\n") or data.count(b"\n") != 1:
            raise FrameFault(f"an output is not exactly one line: {data[:200]!r}")
        try:
            message = _strict_json(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FrameFault(f"an output line is not JSON ({exc}): {data[:200]!r}") from None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
            raise FrameFault(f"an output line is not a JSON-RPC response: {data[:200]!r}")
        if ("result" in message) == ("error" in message) or "method" in message:
            raise FrameFault(f"an output line is not exactly a result or an error: {data[:200]!r}")
        if "error" in message:
            error = message["error"]
            if not (isinstance(error, dict) and type(error.get("code")) is int
                    and isinstance(error.get("message"), str)):
                raise FrameFault(f"a malformed error object: {data[:200]!r}")
        answered[_key(message["id"])] += 1
    extra = answered - expected
    if extra:
        raise FrameFault(f"responses nothing asked for (id: count): {dict(extra)}; expected {dict(expected)}")
    missing = expected - answered
    if missing - cancelled:
        raise FrameFault(f"requests left unanswered (id: count): {dict(missing - cancelled)}")


class Target:
    """The fuzz target: one `StdioServer` per input, all sharing one `FakeApp` (stateless) whose home is made in
    `parent`; `close` removes it (libFuzzer ends the process without Python's clean-up, so the fuzz script puts it
    in its work directory)."""

    def __init__(self, parent: Path = Path("/tmp")) -> None:
        self.app = FakeApp(parent)
        self.environ = {ENV_HOME: str(self.app.root), ENV_SESSION: "wsn1_fuzz_1_" + "s" * 43}
        self.faults = _Faults()
        self._thread_faults: list[str] = []
        logging.getLogger().addHandler(self.faults)
        self._previous_hooks = threading.excepthook, sys.unraisablehook
        threading.excepthook = self._thread_died
        # A resource the server leaves open (a stream, a socket) is a fault too: its ResourceWarning, raised in
        # `__del__` when the connection's objects are freed, reaches `sys.unraisablehook`.
        self._warnings = warnings.catch_warnings()  # restores the filters in close()
        self._warnings.__enter__()
        warnings.simplefilter("error", ResourceWarning)
        sys.unraisablehook = self._unraisable
        self.inputs = 0

    def close(self) -> None:
        threading.excepthook, sys.unraisablehook = self._previous_hooks
        self._warnings.__exit__(None, None, None)
        logging.getLogger().removeHandler(self.faults)
        self.app.close()

    def _thread_died(self, args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread else "?"
        self._thread_faults.append(f"thread {name}: " + "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))

    def _unraisable(self, args: Any) -> None:
        self._thread_faults.append(f"unraisable in {args.object!r}: " + "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))

    def one_input(self, data: bytes) -> None:
        """Run one stdin byte stream through a fresh server and check the P3 criteria.

        Raises:
            FrameFault: a criterion failed (and whatever escaped the server's own `deliver`).
        """
        self.inputs += 1
        del self.faults.records[:], self._thread_faults[:]
        output = _Output()
        server = StdioServer(output.write, self.environ)
        server.start()
        lines: list[bytes] = []
        splitter = LineSplitter()
        size = CHUNK_SIZES[len(data) % len(CHUNK_SIZES)]
        try:
            for start in range(0, len(data), size):
                for line in splitter.feed(data[start:start + size]):
                    lines.append(line)
                    server.deliver(line)
            for line in splitter.end():
                lines.append(line)
                server.deliver(line)
            expected: Counter[str] = Counter()
            cancelled: Counter[str] = Counter()
            for line in lines:
                answer = expected_answer(line)
                if answer is not None:
                    expected[_key(answer[1])] += 1
                if (request_id := _cancelled(line)) is not None:
                    cancelled[request_id] += 1
            # Not answered in time: EOF ends the server, and the check below names what is missing.
            output.wait_for(expected - cancelled, ANSWER_TIMEOUT_S)
        finally:
            server.finish()
            server.sdk.join(ANSWER_TIMEOUT_S)
        if server.sdk.is_alive():
            raise FrameFault("the SDK thread did not end after stdin EOF")
        faults = self.faults.records + self._thread_faults
        if faults:
            raise FrameFault("the server raised, logged an error or left a resource open:\n" + "\n".join(faults))
        check_output(output.writes, expected, cancelled)


def seed_inputs() -> list[bytes]:
    """The seed corpus: the M2 malformed lines (tests/mcp/test_mcp_stdio.py), alone and inside a session, and
    well-formed sessions that reach every tool and the fake app's misbehaviours."""
    from tests.mcp.test_mcp_stdio import MALFORMED

    def line(obj: dict[str, Any]) -> bytes:
        return orjson.dumps(obj) + b"\n"

    init = line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}})
    initialized = line({"jsonrpc": "2.0", "method": "notifications/initialized"})
    handshake = init + initialized
    ping = line({"jsonrpc": "2.0", "id": "ping", "method": "ping"})

    def call(id_: int, tool: str, arguments: dict[str, Any]) -> bytes:
        return line({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                     "params": {"name": tool, "arguments": arguments}})

    seeds = []
    for _, malformed, _, _ in MALFORMED:
        seeds.append(malformed + b"\n")
        seeds.append(handshake + malformed + b"\n" + ping)
    calls = [
        call(1, "wait_agent", {"timeout_ms": 0}), call(2, "send_message", {"target": "bob", "message": "hi"}),
        call(3, "followup_task", {"target": "bob", "message": "do it"}),
        call(4, "receive_messages", {"limit": 5, "cursor": None, "ack_cursor": "cur1_x", "timeout_ms": 0}),
        call(5, "reply", {"request_id": "ask_1", "status": "done", "message": "ok"}),
        call(6, "interrupt_agent", {"target": "bob"}), call(7, "list_agents", {}),
        call(8, "send_message", {"target": "bob", "message": "x", "sender": "eve"}),
    ]
    seeds.append(handshake + b"".join(calls) + line({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}) + ping)
    seeds.extend(handshake + c for c in calls)
    seeds.extend(handshake + call(10, "send_message", {"target": "bob", "message": token})
                 for token in (DROP, GARBAGE, NOT_AN_OBJECT))
    seeds.append(handshake + call(11, "wait_agent", {"timeout_ms": 60_000})
                 + line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11}}))
    seeds.append(b"".join(calls[:2]) + init)  # no handshake first: everything goes to the SDK
    return seeds
