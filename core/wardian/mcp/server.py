"""`wardian mcp serve`: the seven messaging tools over stdio MCP, on the official SDK's low-level server.

```
stdin (dup of fd 0) -> main thread: decode_line -> Front --- constant answer ------------------------> writes
                             |                        |--- quick tools/call -> call thread pool ------> writes
                             |                        `--- everything else -> Inbox ---.
                             `-> malformed line: JSON-RPC error --------------------------------------> writes
SDK thread (started at once, imports the SDK): anyio loop <- Inbox, SDK session (mcp.server.lowlevel.Server) --> writes
writes -> stdout (dup of fd 1), one whole line at a time
```

The SDK costs over a second to import, and a host's handshake needs none of it: the main thread answers
`initialize`, `tools/list` and `ping` from constant data (`_front`) while the SDK server is imported and
started on its own thread. A plain `tools/call` of a tool that never waits runs on a small thread pool of
this server (`_front.QUICK_TOOLS`, the same result code as the SDK's handler, answers compared call by call in
tests/mcp/test_mcp_quick_path.py): the SDK's per-call machinery cost ~1.5 ms of CPU per call here, more than
the app's durable send (#3 bench). Every other message (waits above all) waits in the `Inbox`, in arrival
order, until the SDK's loop takes it.

Invariants:
- Nothing but protocol reaches the real stdout: at startup fd 1 is duplicated for the transport and then
  pointed at stderr, so a stray `print` or a chatty import cannot corrupt the stream (MCP stdio spec; STYLE
  §7). fd 0 is pointed at /dev/null for the same reason. Logs go to stderr only. Lines are written whole,
  under one lock, whichever thread answers.
- Every malformed line gets a JSON-RPC error where the protocol allows one (`_frames`), and the server
  keeps serving.
- Discovery (`initialize`, `tools/list`) needs no WARDIAN_HOME, app or session and touches no file.
- The constant answers are the SDK's own (`_front`); the SDK sees the handshake replayed, so it serves
  `tools/call` as if it had answered `initialize` itself, and no request is answered twice.
- Tool failures are results with `isError: true` and `structuredContent.error`; only protocol faults are
  JSON-RPC errors. A call is sent to the app at most once (`_calls`).
- Stdin EOF ends the server promptly: requests handed to the SDK are still answered (the SDK is waited for
  if it is still starting, then calls get a short grace), then the rest are abandoned (an admitted message
  stays admitted; the app never cancels admitted work). Without such requests the server exits at once,
  even while the SDK is still being imported. SIGTERM keeps its default action, so it ends the process at
  once; the server starts no child processes.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from wardian.mcp._frames import FrameError, decode_line, encode_message
from wardian.mcp._front import Front, QuickCall
from wardian.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from wardian.protocol.tools import MAX_MCP_FRAME_BYTES

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from wardian.mcp._calls import Caller

log = logging.getLogger("wardian.mcp")

# How long calls still running after stdin EOF may finish before the server exits anyway.
EOF_GRACE_S = 0.5
# Threads of the quick path (`_front.QUICK_TOOLS`): calls that never wait, so a few serve any host.
QUICK_WORKERS = 4
# `WARDIAN_MCP_QUICK_PATH=0` sends every tools/call to the SDK (a diagnostic switch; tests compare both paths).
ENV_QUICK_PATH = "WARDIAN_MCP_QUICK_PATH"
# How long requests that arrived before stdin EOF wait for the SDK server to start (it imports in ~1-2 s).
SDK_START_TIMEOUT_S = 60.0
# Messages the SDK's loop buffers before the stdin thread waits for it to catch up.
_SDK_BUFFER = 16
_READ_CHUNK = 1 << 16


class _StdioFds:
    """The private duplicates of fd 0 and fd 1 that carry the protocol once the real ones are diverted."""

    def __init__(self) -> None:
        self.stdin = os.dup(0)
        self.stdout = os.dup(1)
        self._write_lock = threading.Lock()
        # Stray writes to fd 1 (print, C extensions, children) now land on stderr; reads of fd 0 get EOF.
        os.dup2(2, 1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)

    def write(self, data: bytes) -> None:
        """Write whole lines: two threads answer, and a pipe write over PIPE_BUF bytes may be split."""
        with self._write_lock:
            view = memoryview(data)
            while view:
                written = os.write(self.stdout, view)
                view = view[written:]


class LineSplitter:
    """Splits the stdin byte stream into lines, whatever the read sizes.

    A line longer than MAX_MCP_FRAME_BYTES comes out truncated to one byte over the cap (so it is answered as
    too long) and the rest of it is skipped up to its newline, keeping memory bounded.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanned = 0  # bytes of `_buf` known to hold no newline
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` completes, in order."""
        buf = self._buf
        buf += chunk
        lines: list[bytes] = []
        while True:
            # Only the new bytes are searched: a long line read in small pieces must not cost quadratic time.
            nl = buf.find(b"\n", self._scanned)
            self._scanned = 0 if nl >= 0 else len(buf)
            if self._skipping:
                if nl < 0:
                    buf.clear()
                    self._scanned = 0
                    break
                del buf[:nl + 1]
                self._skipping = False
                continue
            if nl < 0:
                if len(buf) > MAX_MCP_FRAME_BYTES:
                    lines.append(bytes(buf[:MAX_MCP_FRAME_BYTES + 1]))
                    buf.clear()
                    self._scanned = 0
                    self._skipping = True
                break
            lines.append(bytes(buf[:nl]))
            del buf[:nl + 1]
        return lines

    def end(self) -> list[bytes]:
        """At EOF: the last line, if it had no newline."""
        rest = [] if self._skipping or not self._buf else [bytes(self._buf)]
        self._buf.clear()
        self._scanned = 0
        return rest


def _reader(fd: int, deliver: Callable[[bytes], None]) -> None:
    """Read lines from `fd` and deliver each, until EOF (see `LineSplitter`)."""
    lines = LineSplitter()
    try:
        while chunk := os.read(fd, _READ_CHUNK):
            for line in lines.feed(chunk):
                deliver(line)
        for line in lines.end():
            deliver(line)
    except OSError:
        log.exception("the stdio transport failed")


class _Outstanding:
    """The ids of client requests handed to the SDK and not yet answered (shared by both threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: Counter[Any] = Counter()
        self._total = 0
        self.changed: Callable[[], None] = lambda: None  # the SDK loop's wake-up, once it runs

    def add(self, id_: Any) -> None:
        with self._lock:
            self._ids[id_] += 1
            self._total += 1

    def done(self, id_: Any) -> None:
        with self._lock:
            if self._ids[id_] <= 0:
                return
            self._ids[id_] -= 1
            if not self._ids[id_]:
                del self._ids[id_]
            self._total -= 1
        self.changed()

    def __bool__(self) -> bool:
        with self._lock:
            return self._total > 0


class _Inbox:
    """Messages for the SDK in arrival order: kept until its loop attaches, then sent into that loop.

    `None` marks stdin EOF. If the SDK cannot start, requests get a JSON-RPC internal error instead.
    """

    def __init__(self, reject: Callable[[dict[str, Any]], None]) -> None:
        self._lock = threading.Lock()
        self._backlog: list[dict[str, Any] | None] = []
        self._send: Callable[[dict[str, Any] | None], None] | None = None
        self._failed = False
        self._reject = reject
        self.attached = threading.Event()

    def put(self, item: dict[str, Any] | None) -> None:
        with self._lock:
            if self._send is None and not self._failed:
                self._backlog.append(item)
                return
            send = None if self._failed else self._send
        if send is not None:
            try:
                send(item)  # waits while the SDK's buffer is full
                return
            except Exception:  # the SDK's loop is gone (it failed, or the server is exiting)
                log.debug("the SDK loop ended before a message could be handed to it")
        if item is not None:
            self._reject(item)

    def attach(self, send: Callable[[dict[str, Any] | None], None]) -> list[dict[str, Any] | None]:
        """Called on the SDK's loop: returns what arrived so far; later messages go to `send`."""
        with self._lock:
            backlog, self._backlog = self._backlog, []
            self._send = send
        self.attached.set()
        return backlog

    def fail(self) -> None:
        """The SDK cannot serve: reject every request kept or still to come."""
        with self._lock:
            self._failed = True
            backlog, self._backlog = self._backlog, []
        for item in backlog:
            if item is not None:
                self._reject(item)
        self.attached.set()


def build_server(caller: Caller) -> Server[Any]:
    """The SDK's low-level server of the seven tools, calling the app for `caller` (imports the SDK)."""
    from functools import partial

    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    from wardian import __version__
    from wardian.mcp._calls import tool_outcome
    from wardian.protocol.tools import SERVER_INSTRUCTIONS, SERVER_NAME, TOOLS, TOOLS_BY_NAME

    listed = types.ListToolsResult(tools=[types.Tool.model_validate(t.definition(), by_name=False)
                                          for t in TOOLS])

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listed

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = TOOLS_BY_NAME.get(params.name)
        if spec is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name[:80]!r}")
        text, structured, is_error = await anyio.to_thread.run_sync(
            partial(tool_outcome, caller, spec, params.arguments), abandon_on_cancel=True)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured,
                                    is_error=is_error)

    return Server(SERVER_NAME, version=__version__, instructions=SERVER_INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call)


async def _serve_sdk(write: Callable[[bytes], None], get_caller: Callable[[], Caller], inbox: _Inbox,
                     outstanding: _Outstanding, front: Front) -> None:
    """Run the SDK session on this thread's loop, fed by `inbox`, until stdin ends."""
    import anyio
    import anyio.from_thread
    import anyio.lowlevel
    import mcp_types as types
    import orjson
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    caller = get_caller()
    server = build_server(caller)
    to_sdk: MemoryObjectSendStream[Any]
    from_host: MemoryObjectReceiveStream[Any]
    to_sdk, from_host = anyio.create_memory_object_stream[Any](0)
    to_host, from_sdk = anyio.create_memory_object_stream[Any](0)
    inbox_in, inbox_out = anyio.create_memory_object_stream[dict[str, Any] | None](_SDK_BUFFER)
    token = anyio.lowlevel.current_token()
    answered = anyio.Event()

    loop_thread = threading.get_ident()

    def wake() -> None:
        if outstanding:
            return
        if threading.get_ident() == loop_thread:
            answered.set()
        else:
            anyio.from_thread.run_sync(answered.set, token=token)

    outstanding.changed = wake

    async def to_session(obj: dict[str, Any]) -> None:
        try:
            message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
        except ValidationError:
            if "method" not in obj:
                # A response of the host's (to no request of ours: the server sends none) that the SDK's models
                # refuse. Never answered: its id is in the host's own id space, so an error carrying it could be
                # taken for the answer to the host's request of that id (found with the P3 fuzz target).
                log.warning("dropped a malformed response from the host (id %r)", obj.get("id"))
                return
            error = FrameError(INVALID_REQUEST, "Invalid request: not a valid JSON-RPC message", obj.get("id"))
            write(encode_message(error.response()))
            if "id" in obj:
                outstanding.done(obj["id"])
            return
        await to_sdk.send(SessionMessage(message))

    async def pump_in() -> None:
        backlog = inbox.attach(lambda item: anyio.from_thread.run(inbox_in.send, item, token=token))
        log.debug("the SDK server is ready; %d message(s) were waiting for it", len(backlog))
        for obj in backlog:
            if obj is None:
                return
            await to_session(obj)
        async with inbox_out:
            async for obj in inbox_out:
                if obj is None:
                    return
                await to_session(obj)

    async def pump_out() -> None:
        async with from_sdk:
            async for session_message in from_sdk:
                message = session_message.message
                data = message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
                answered_id = getattr(message, "id", None)
                is_response = not hasattr(message, "method")
                if is_response and answered_id == front.replay_id:
                    result = orjson.loads(data).get("result")
                    if not front.replay_matches(result):
                        log.error("the SDK's initialize result differs from the constant answer written to the "
                                  "host: %s", data[:2000].decode("utf-8", "replace"))
                    continue
                write(data + b"\n")
                if is_response:
                    outstanding.done(answered_id)

    session_done = anyio.Event()

    async def run_session() -> None:
        try:
            async with anyio.create_task_group() as session_tg:
                session_tg.start_soon(pump_out)
                await server.run(from_host, to_host, server.create_initialization_options())
                session_tg.cancel_scope.cancel()
        finally:
            session_done.set()

    try:
        async with anyio.create_task_group() as session:
            session.start_soon(run_session)
            await pump_in()
            # stdin ended: calls in flight get a short grace to answer, then the session stops.
            if outstanding:
                answered = anyio.Event()
                if outstanding:
                    with anyio.move_on_after(EOF_GRACE_S):
                        await answered.wait()
            await to_sdk.aclose()
            with anyio.move_on_after(EOF_GRACE_S):
                await session_done.wait()
            session.cancel_scope.cancel()
    finally:
        outstanding.changed = lambda: None
        # Both ends of the inbox (a later `Inbox.put` fails and rejects its request instead). Left open, they
        # leaked (ResourceWarnings) once per connection served in a process: found by the P3 fuzz target.
        inbox_in.close()
        inbox_out.close()
        caller.close()


def _run_sdk(write: Callable[[bytes], None], get_caller: Callable[[], Caller], inbox: _Inbox,
             outstanding: _Outstanding, front: Front) -> None:
    """The SDK thread: import the SDK and serve until stdin ends; on failure, requests get an error."""
    try:
        # The quick path's modules first (pydantic, the app client, ~0.1 s): a quick call then never waits for the
        # SDK's own import (~1 s), whose finders hold the interpreter's import lock now and then.
        get_caller()
        import anyio

        anyio.run(_serve_sdk, write, get_caller, inbox, outstanding, front)
    except BaseException:
        log.exception("the MCP SDK server failed")
        inbox.fail()


class StdioServer:
    """One stdio connection of `wardian mcp serve`: lines from the host in, whole JSON-RPC lines out through `write`.

    `main` wires it to the real stdin and stdout; the P3 fuzz target (`tests/reliability/mcp_frames.py`) drives
    it in-process. `write` is called from two threads and must write each call's bytes whole.
    """

    def __init__(self, write: Callable[[bytes], None], environ: Mapping[str, str]) -> None:
        self._write = write
        self._environ = environ
        self.outstanding = _Outstanding()
        self.front = Front(quick=environ.get(ENV_QUICK_PATH, "1") != "0")
        self.inbox = _Inbox(self._reject)
        self._caller: Caller | None = None
        self._caller_lock = threading.Lock()
        self._quick: ThreadPoolExecutor | None = None
        self._quick_running = 0
        self._quick_idle = threading.Condition()
        self.sdk = threading.Thread(target=_run_sdk, name="wardian-mcp-sdk", daemon=True,
                                    args=(write, self.caller, self.inbox, self.outstanding, self.front))

    def caller(self) -> Caller:
        """The managed caller and its pooled app connections, shared by the SDK's handler and the quick path."""
        with self._caller_lock:
            if self._caller is None:
                from wardian.mcp._calls import Caller  # pydantic: not before the first call (startup, #3)

                self._caller = Caller(self._environ)
            return self._caller

    def start(self) -> None:
        """Start the SDK server on its own thread (it imports the SDK); lines may be delivered at once."""
        self.sdk.start()

    def deliver(self, line: bytes) -> None:
        """Handle one line from the host (without its newline)."""
        try:
            obj = decode_line(line)
        except FrameError as exc:
            self._write(encode_message(exc.response()))
            return
        if obj is None:
            return
        route = self.front.route(obj, sdk_busy=bool(self.outstanding))
        if route.quick is not None:
            self._start_quick(route.quick)
            return
        if route.answer is not None:
            self._write(route.answer)
            log.debug("answered %s from constant data", obj.get("method"))
        if route.forward is not None:
            if "method" in obj and "id" in obj and route.answer is None:
                self.outstanding.add(obj["id"])
                if not self.inbox.attached.is_set():
                    log.debug("%s waits for the SDK server to start", obj["method"])
            self.inbox.put(route.forward)

    def finish(self) -> None:
        """Stdin ended: requests handed to the SDK are still answered, then the SDK server stops.

        It waits for the SDK to start (if it is still importing) and then for its grace; with no such request,
        there is nothing to wait for.
        """
        self.inbox.put(None)
        self._finish_quick()
        if self.outstanding or self.inbox.attached.is_set():
            self.sdk.join(SDK_START_TIMEOUT_S + 2 * EOF_GRACE_S if not self.inbox.attached.is_set()
                          else 2 * EOF_GRACE_S + 1)
        with self._caller_lock:
            caller = self._caller
        if caller is not None:
            caller.close()  # last: both paths have had their grace (a call ending later closes its own socket)

    def _start_quick(self, call: QuickCall) -> None:
        """Run a quick tool call on a pooled thread (the stdin thread keeps reading) and write its answer."""
        log.debug("tools/call %s on the quick path", call.spec.name)
        with self._quick_idle:
            self._quick_running += 1
            if self._quick is None:
                self._quick = ThreadPoolExecutor(max_workers=QUICK_WORKERS, thread_name_prefix="wardian-mcp-call")
            pool = self._quick
        pool.submit(self._run_quick, call)

    def _run_quick(self, call: QuickCall) -> None:
        try:
            from wardian.mcp._calls import call_tool_result, tool_outcome

            self._write(call.answer(call_tool_result(*tool_outcome(self.caller(), call.spec, call.arguments))))
        except BaseException:
            log.exception("the quick path failed for %s", call.spec.name)
            self._write(encode_message({"jsonrpc": "2.0", "id": call.id, "error": {
                "code": INTERNAL_ERROR, "message": f"Internal error: {call.spec.name} failed inside the MCP server; "
                "whether the app carried it out is unknown: do not resend automatically"}}))
        finally:
            with self._quick_idle:
                self._quick_running -= 1
                self._quick_idle.notify_all()

    def _finish_quick(self) -> None:
        """Stdin ended: quick calls under way get the same grace as the SDK's, then the pool is let go."""
        with self._quick_idle:
            self._quick_idle.wait_for(lambda: self._quick_running == 0, timeout=EOF_GRACE_S)
            pool, self._quick = self._quick, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _reject(self, obj: dict[str, Any]) -> None:
        if "method" in obj and "id" in obj and obj["id"] != self.front.replay_id:
            self._write(encode_message({"jsonrpc": "2.0", "id": obj["id"], "error": {
                "code": INTERNAL_ERROR, "message": "Internal error: the MCP server could not start its SDK session"}}))
            self.outstanding.done(obj["id"])


def main() -> int:
    """Entry point of `wardian mcp serve`; returns the process exit code."""
    fds = _StdioFds()
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("WARDIAN_LOG_LEVEL", "WARNING").upper(),
                        format="wardian-mcp %(levelname)s %(name)s: %(message)s")
    server = StdioServer(fds.write, dict(os.environ))
    server.start()
    code = 0
    try:
        _reader(fds.stdin, server.deliver)
        server.finish()
    except KeyboardInterrupt:
        code = 130
    except Exception:
        log.exception("the MCP server failed")
        code = 1
    sys.stderr.flush()
    if any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread()):
        # The SDK thread is still importing, or a worker thread is still blocked in an app exchange abandoned at
        # EOF; the interpreter would wait for it at exit (up to the exchange's timeout) or tear an import down
        # mid-way, so leave without either.
        os._exit(code)
    return code
