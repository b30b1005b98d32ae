"""`wardian mcp serve`: the seven messaging tools over stdio MCP, on the official SDK's low-level server.

```
stdin (dup of fd 0) -> stdin thread: decode_line -> Front --- constant answer -----------------------> writes
                             |                         |--- quick tools/call -> call pool | wait pool --> writes
                             |                         `--- everything else -> Inbox ---.
                             `-> malformed line: JSON-RPC error --------------------------------------> writes
SDK thread (started at once, imports the SDK): anyio loop <- Inbox, SDK session (mcp.server.lowlevel.Server) --> writes
writes -> stdout (dup of fd 1), one whole line at a time
main thread: waits for stdin EOF or the host's death (`_watch_parent`), then `StdioServer.finish`
```

The SDK costs over a second to import, and a host's handshake needs none of it: the stdin thread answers
`initialize`, `tools/list` and `ping` from constant data (`_front`) while the SDK server is imported and
started on its own thread. A plain `tools/call` of any of the seven tools runs on thread pools of this server
(`_front.QUICK_TOOLS`, the same result code as the SDK's handler, answers compared call by call in
tests/mcp/test_mcp_quick_path.py): the SDK's per-call machinery cost ~1.5 ms of CPU per call here, more than
the app's durable send (#3 bench), and a first wait served by the SDK waited for its import (#13). Waits
(`wait_agent`, `receive_messages`) have a pool of their own, so a 60 s wait never delays a send. Every other
message waits in the `Inbox`, in arrival order, until the SDK's loop takes it.

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
- A request the host cancels (`notifications/cancelled`) gets no answer once the cancellation is processed, on
  either path: a quick call's answer is dropped when its app exchange ends
  (the exchange is never resent); a request handed to the SDK stops counting as outstanding at once and any
  answer the SDK still gives it is dropped (`_Outstanding`). A cancelled call may still have taken effect.
- A cancelled wait (`wait_agent`, `receive_messages`) frees its thread at once, on either path: its app exchange
  is aborted (`_calls.WaitExchange`: the quick path's `_cancel`, the SDK's handler when the SDK cancels it), its
  connection is discarded, and the app, seeing the connection end, ends the wait and unsubscribes it
  (app/server.py). Only waits are aborted: any other call keeps its exchange to the end, as aborting a send could
  leave its delivery uncertain.
- Stdin EOF ends the server promptly: waits in flight, on either path, are abandoned at once like cancelled ones
  (aborted, never answered: nobody is left to wait for them); other requests handed to the SDK are still
  answered (the SDK is waited for if it is still starting, then calls get a short grace), other quick calls get
  the same grace, then the rest are abandoned (an admitted message stays admitted; the app never cancels
  admitted work). Without such requests the server exits at once, even while the SDK is still being imported.
  The death of the host (the MCP client that started it, found past wrapper shells and the onefile launcher, see
  `_host`) or of the direct parent ends it the same way, even while another process holds stdin open
  (within about 2 s). SIGTERM keeps its default action, so it ends the process at once (the kernel
  closes its app connections, which ends their waits in the app); the server starts no child processes.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from wardian.mcp._frames import FrameError, JsonId, cancelled_request, decode_line, encode_message
from wardian.mcp._front import Front, QuickCall, Route
from wardian.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from wardian.protocol.tools import MAX_MCP_FRAME_BYTES

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from wardian.mcp._calls import Caller, WaitExchange

log = logging.getLogger("wardian.mcp")
T = TypeVar("T")

# How long calls still running after stdin EOF may finish before the server exits anyway.
EOF_GRACE_S = 0.5
# Threads of the quick path (`_front.QUICK_TOOLS`) for calls that never wait: each takes a few ms, so a few serve
# any host, and a burst queues only briefly.
QUICK_WORKERS = 4
# Threads of the quick path for waits (`QuickCall.waits`: `wait_agent`, `receive_messages` with `timeout_ms`). A
# wait may block up to MAX_WAIT_MS (60 s) on an app connection of its own, so waits get their own threads: they
# never hold up a send, and never queue behind one another. A model's loop waits once at a time; a host running
# tool calls in parallel adds a few (a cancelled wait's exchange is aborted, so its thread is free again at once).
# Eight cover that with room to spare at ~1 idle thread each; a wait beyond them goes to the SDK, which runs it on
# anyio's worker threads, rather than queue here behind a minute-long one.
QUICK_WAIT_WORKERS = 8
# How often the server checks that the process that started it is still alive (reliability-matrix M5 (c): exit
# within ~2 s of the parent's death, grace included).
PARENT_POLL_S = 0.25
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


def _take(counter: Counter[JsonId], key: JsonId) -> bool:
    """Take one `key` from `counter` if it holds one; never below zero."""
    if counter.get(key, 0) <= 0:
        return False
    counter[key] -= 1
    if not counter[key]:
        del counter[key]
    return True


class _Outstanding:
    """The client requests handed to the SDK and not yet answered, by id (shared by the stdin thread and the SDK's
    loop).

    A request is outstanding from the moment it is handed to the SDK until its answer is written or the host
    cancels it (`notifications/cancelled`, processed on the stdin thread as it is read): the host has stopped
    waiting, and MCP says a cancelled request gets no answer, so nothing need wait for it (the constant answers,
    the EOF grace). A cancelled request stays *unsettled* until the SDK is done with it: its handler ends without
    an answer (the SDK's `on_request_unanswered` hook, `unanswered`), or, if the SDK had started answering before
    it saw the cancellation, that answer reaches `answer` and is dropped. So nothing is written for an id after
    its cancellation was processed, nothing is answered twice, and no count goes below zero.

    Ids match exactly, as JSON-RPC compares them. The SDK (mcp 2.3.0) also takes a cancellation's "7" for request
    7; such a request is released when the SDK ends it unanswered.
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()  # notified whenever a request stops being outstanding
        self._waiting: Counter[JsonId] = Counter()
        self._unsettled: Counter[JsonId] = Counter()  # cancelled by the host, not yet settled by the SDK

    def add(self, id_: JsonId) -> None:
        with self._lock:
            self._waiting[id_] += 1

    def cancel(self, id_: JsonId) -> bool:
        """The host cancelled request `id_`: it stops being outstanding. False if no such request is."""
        with self._lock:
            if not _take(self._waiting, id_):
                return False
            self._unsettled[id_] += 1
            self._lock.notify_all()
        return True

    def answer(self, id_: JsonId, write: Callable[[], None]) -> bool:
        """Write the answer to request `id_` with `write`, unless the host cancelled it (then it is dropped).

        The write happens under the lock, so a cancellation is processed wholly before it (nothing is written) or
        after it (the answer went out first). A host that reuses a cancelled id before the SDK settled it (MCP
        forbids reuse) may lose the second request's answer instead; the counts stay exact.
        """
        with self._lock:
            if _take(self._unsettled, id_):
                log.debug("dropped the SDK's answer to request %r: the host cancelled it", id_)
                return False
            write()
            if _take(self._waiting, id_):
                self._lock.notify_all()
        return True

    def unanswered(self, id_: JsonId) -> None:
        """The SDK ended request `id_` without an answer: it saw the host's cancellation."""
        with self._lock:
            if not _take(self._unsettled, id_) and _take(self._waiting, id_):
                self._lock.notify_all()
        log.debug("request %r ended unanswered after the host cancelled it", id_)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._waiting)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` until no request is outstanding; whether none is."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._waiting, timeout_s)

    def unsettled(self) -> int:
        """Cancelled requests the SDK has not yet ended (diagnostics and tests)."""
        with self._lock:
            return self._unsettled.total()


class _SdkWaits:
    """The waits the SDK's handler runs on anyio's worker threads (shared by the SDK's loop, those threads and
    `StdioServer.finish`): their exchanges, so that the end of stdin can abort them, and the threads they hold.

    The handler aborts its wait's exchange itself when the SDK cancels it (the host's `notifications/cancelled`, or
    the session's end), as anyio abandons the thread. At stdin EOF (or the parent's death) `abandon` aborts every
    wait in flight, and any the SDK starts later, at once, each first taken off `_Outstanding` as if the host had
    cancelled it: nothing waits for it, and its answer is dropped, as a quick wait's is.
    """

    def __init__(self, outstanding: _Outstanding | None) -> None:
        self._lock = threading.Condition()  # notified whenever a thread leaves a wait
        self._live: dict[int, tuple[JsonId | None, WaitExchange]] = {}
        self._serials = itertools.count()
        self._abandoned = False
        self._outstanding = outstanding
        self.threads = 0  # worker threads in a wait's exchange now, aborted ones included (diagnostics and tests)

    @contextmanager
    def track(self, request_id: JsonId | None) -> Iterator[WaitExchange]:
        """The exchange of the wait `request_id` while the handler runs it (on the SDK's loop)."""
        from wardian.mcp._calls import WaitExchange

        exchange = WaitExchange()
        with self._lock:
            serial = next(self._serials)
            self._live[serial] = (request_id, exchange)
            abandoned = self._abandoned
        if abandoned:
            self._abandon(request_id, exchange)
        try:
            yield exchange
        finally:
            with self._lock:
                del self._live[serial]

    def run(self, request_id: JsonId | None, work: Callable[[], T]) -> T:
        """Run `work`, the exchange of the wait `request_id`, on this worker thread (counted in `threads`)."""
        with self._lock:
            self.threads += 1
        try:
            return work()
        finally:
            with self._lock:
                self.threads -= 1
                self._lock.notify_all()
                # Under the lock: logged before anything waiting for this count (the end of stdin) goes on.
                log.debug("the wait thread of request %r is free again (SDK path: %d wait(s) running)", request_id,
                          self.threads)

    def abandon(self) -> None:
        """Stdin ended: abort every wait in flight, and any started from now on."""
        with self._lock:
            self._abandoned = True
            live = list(self._live.values())
        for request_id, exchange in live:
            self._abandon(request_id, exchange)
        if live:
            log.debug("stdin ended: aborted %d wait(s) on the SDK path", len(live))

    def _abandon(self, request_id: JsonId | None, exchange: WaitExchange) -> None:
        if request_id is not None and self._outstanding is not None:
            self._outstanding.cancel(request_id)  # first: the answer the abort brings about is dropped
        exchange.abort("the MCP server is exiting")

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` until no worker thread is in a wait; whether none is."""
        with self._lock:
            return self._lock.wait_for(lambda: not self.threads, timeout_s)


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


def build_server(caller: Caller, waits: _SdkWaits | None = None) -> Server[Any]:
    """The SDK's low-level server of the seven tools, calling the app for `caller` (imports the SDK); its waits are
    tracked in `waits` (a private tracker when None)."""
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
    tracked = waits if waits is not None else _SdkWaits(None)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listed

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = TOOLS_BY_NAME.get(params.name)
        if spec is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name[:80]!r}")
        if spec.wait_argument is None:
            text, structured, is_error = await anyio.to_thread.run_sync(
                partial(tool_outcome, caller, spec, params.arguments), abandon_on_cancel=True)
        else:
            request_id = ctx.request_id
            with tracked.track(request_id) as exchange:
                try:
                    text, structured, is_error = await anyio.to_thread.run_sync(
                        partial(tracked.run, request_id, partial(tool_outcome, caller, spec, params.arguments,
                                                                 exchange)), abandon_on_cancel=True)
                except anyio.get_cancelled_exc_class():
                    # The SDK cancelled this handler and anyio abandons its thread: end the thread's exchange now,
                    # not when the app answers it (up to a minute later).
                    exchange.abort("the host cancelled it")
                    raise
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured,
                                    is_error=is_error)

    return Server(SERVER_NAME, version=__version__, instructions=SERVER_INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call)


async def _serve_sdk(write: Callable[[bytes], None], get_caller: Callable[[], Caller], inbox: _Inbox,
                     outstanding: _Outstanding, front: Front, waits: _SdkWaits) -> None:
    """Run the SDK session on this thread's loop, fed by `inbox`, until stdin ends."""
    from functools import partial

    import anyio
    import anyio.from_thread
    import anyio.lowlevel
    import anyio.to_thread
    import mcp_types as types
    import orjson
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import ServerMessageMetadata, SessionMessage
    from pydantic import ValidationError

    caller = get_caller()
    server = build_server(caller, waits)
    to_sdk: MemoryObjectSendStream[Any]
    from_host: MemoryObjectReceiveStream[Any]
    to_sdk, from_host = anyio.create_memory_object_stream[Any](0)
    to_host, from_sdk = anyio.create_memory_object_stream[Any](0)
    inbox_in, inbox_out = anyio.create_memory_object_stream[dict[str, Any] | None](_SDK_BUFFER)
    token = anyio.lowlevel.current_token()

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
            line = encode_message(error.response())
            if "id" in obj:
                outstanding.answer(obj["id"], lambda: write(line))
            else:
                write(line)
            return
        metadata = None
        if "method" in obj and "id" in obj:
            # The SDK ends a request the host cancelled without answering it, and says so through this hook: the
            # one sign that a cancelled request is settled (`_Outstanding`).
            request_id = obj["id"]

            async def settled() -> None:
                outstanding.unanswered(request_id)

            metadata = ServerMessageMetadata(on_request_unanswered=settled)
        await to_sdk.send(SessionMessage(message, metadata=metadata))

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
                if is_response and answered_id is not None:
                    outstanding.answer(answered_id, partial(write, data + b"\n"))
                else:
                    write(data + b"\n")

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
                await anyio.to_thread.run_sync(outstanding.wait_idle, EOF_GRACE_S)
            await to_sdk.aclose()
            with anyio.move_on_after(EOF_GRACE_S):
                await session_done.wait()
            session.cancel_scope.cancel()
    finally:
        # Both ends of the inbox (a later `Inbox.put` fails and rejects its request instead). Left open, they
        # leaked (ResourceWarnings) once per connection served in a process: found by the P3 fuzz target.
        inbox_in.close()
        inbox_out.close()
        caller.close()


def _run_sdk(write: Callable[[bytes], None], get_caller: Callable[[], Caller], inbox: _Inbox,
             outstanding: _Outstanding, front: Front, waits: _SdkWaits) -> None:
    """The SDK thread: import the SDK and serve until stdin ends; on failure, requests get an error."""
    try:
        # The quick path's modules first (pydantic, the app client, ~0.1 s): a quick call then never waits for the
        # SDK's own import (~1 s), whose finders hold the interpreter's import lock now and then.
        get_caller()
        import anyio

        anyio.run(_serve_sdk, write, get_caller, inbox, outstanding, front, waits)
    except BaseException:
        log.exception("the MCP SDK server failed")
        inbox.fail()


class StdioServer:
    """One stdio connection of `wardian mcp serve`: lines from the host in, whole JSON-RPC lines out through `write`.

    `main` wires it to the real stdin and stdout; the P3 fuzz target (`tests/reliability/mcp_frames.py`) drives
    it in-process. `write` is called from several threads and must write each call's bytes whole.
    """

    def __init__(self, write: Callable[[bytes], None], environ: Mapping[str, str]) -> None:
        self._write = write
        self._environ = environ
        self.outstanding = _Outstanding()
        self.front = Front(quick=environ.get(ENV_QUICK_PATH, "1") != "0")
        self.inbox = _Inbox(self._reject)
        self._caller: Caller | None = None
        self._caller_lock = threading.Lock()
        self._finish_lock = threading.Lock()
        self._finished = False  # stdin ended (or the parent died): later lines are ignored
        # The quick path. `_quick_live` holds the calls started and neither answered nor cancelled; an answer is
        # written only by taking its call out of it, under `_quick_lock`, so a cancellation or the end of the EOF
        # grace (which empty it) is processed wholly before or after any write. `_quick_exchanges` holds the
        # exchanges of the waits among them whose thread has begun, which a cancellation aborts; a wait cancelled
        # before its thread began never reaches the app.
        self._quick_lock = threading.Condition()
        self._quick_live: dict[int, QuickCall] = {}
        self._quick_exchanges: dict[int, WaitExchange] = {}
        self._quick_serials = itertools.count()
        self._quick_pool: ThreadPoolExecutor | None = None
        self._wait_pool: ThreadPoolExecutor | None = None
        self._waits_running = 0  # threads of `_wait_pool` in use, those of cancelled waits included
        self.sdk_waits = _SdkWaits(self.outstanding)
        self.sdk = threading.Thread(target=_run_sdk, name="wardian-mcp-sdk", daemon=True,
                                    args=(write, self.caller, self.inbox, self.outstanding, self.front,
                                          self.sdk_waits))

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
        if self._finished:
            # Only after the parent's death, while another process still holds stdin open: no one is left to answer.
            log.debug("ignored a line read after the server began to exit")
            return
        try:
            obj = decode_line(line)
        except FrameError as exc:
            self._write(encode_message(exc.response()))
            return
        if obj is None:
            return
        cancelled = cancelled_request(obj)
        if cancelled is not None:
            self._cancel(cancelled)
        route = self.front.route(obj, sdk_busy=bool(self.outstanding))
        if route.quick is not None:
            if self._start_quick(route.quick):
                return
            route = Route(forward=obj)  # every wait thread is taken: the SDK serves this one
        if route.answer is not None:
            self._write(route.answer)
            log.debug("answered %s from constant data", obj.get("method"))
        if route.forward is not None:
            if "method" in obj and "id" in obj and route.answer is None:
                self.outstanding.add(obj["id"])
                if not self.inbox.attached.is_set():
                    log.debug("%s waits for the SDK server to start", obj["method"])
            self.inbox.put(route.forward)  # a cancellation too: the SDK cancels its own handler of that request

    def wait_threads(self) -> int:
        """Threads held by waits now, on either path, those of cancelled waits included (diagnostics and tests)."""
        with self._quick_lock:
            quick = self._waits_running
        return quick + self.sdk_waits.threads

    def finish(self) -> None:
        """Stdin ended (or the parent died): waits are aborted at once, on either path, and never answered; other
        requests handed to the SDK are still answered, then the SDK server stops.

        It waits for the SDK to start (if it is still importing) and then for its grace; with no such request,
        there is nothing to wait for. Quick calls get the same grace. A second call returns once the first is done.
        """
        with self._finish_lock:
            if self._finished:
                return
            self._finished = True
            self.sdk_waits.abandon()  # first: an abandoned wait no longer counts as outstanding
            self.inbox.put(None)
            self._finish_quick()
            if not self.sdk_waits.wait_idle(EOF_GRACE_S):
                log.debug("%d aborted wait(s) of the SDK path still hold a thread", self.sdk_waits.threads)
            if self.outstanding or self.inbox.attached.is_set():
                self.sdk.join(SDK_START_TIMEOUT_S + 2 * EOF_GRACE_S if not self.inbox.attached.is_set()
                              else 2 * EOF_GRACE_S + 1)
            with self._caller_lock:
                caller = self._caller
            if caller is not None:
                caller.close()  # last: both paths have had their grace (a call ending later closes its own socket)

    def _cancel(self, request_id: JsonId) -> None:
        """The host cancelled `request_id`: whichever path has it answers nothing from now on."""
        with self._quick_lock:
            quick = [serial for serial, call in self._quick_live.items() if call.id == request_id]
            for serial in quick:
                del self._quick_live[serial]
            exchanges = [exchange for serial in quick if (exchange := self._quick_exchanges.pop(serial, None))]
            if quick:
                self._quick_lock.notify_all()
        for exchange in exchanges:
            exchange.abort("the host cancelled it")  # a wait: its thread is free again at once
        sdk = self.outstanding.cancel(request_id)
        if quick or sdk:
            log.debug("the host cancelled request %r (%s)", request_id, "quick path" if quick else "SDK")

    def _start_quick(self, call: QuickCall) -> bool:
        """Run a quick tool call on a pooled thread (the stdin thread keeps reading) that writes its answer.

        False when `call` is a wait and every wait thread is taken.
        """
        with self._quick_lock:
            if call.waits:
                if self._waits_running >= QUICK_WAIT_WORKERS:
                    log.debug("tools/call %s goes to the SDK: %d waits are in flight", call.spec.name,
                              self._waits_running)
                    return False
                self._waits_running += 1
                if self._wait_pool is None:
                    self._wait_pool = ThreadPoolExecutor(max_workers=QUICK_WAIT_WORKERS,
                                                         thread_name_prefix="wardian-mcp-wait")
                pool = self._wait_pool
            else:
                if self._quick_pool is None:
                    self._quick_pool = ThreadPoolExecutor(max_workers=QUICK_WORKERS,
                                                          thread_name_prefix="wardian-mcp-call")
                pool = self._quick_pool
            serial = next(self._quick_serials)
            self._quick_live[serial] = call
        log.debug("tools/call %s on the quick path", call.spec.name)
        pool.submit(self._run_quick, serial, call)
        return True

    def _run_quick(self, serial: int, call: QuickCall) -> None:
        try:
            try:
                from wardian.mcp._calls import WaitExchange, call_tool_result, tool_outcome

                exchange = None
                if call.waits:
                    exchange = WaitExchange()
                    with self._quick_lock:
                        if serial not in self._quick_live:
                            log.debug("request %r (%s) was cancelled before its wait began", call.id, call.spec.name)
                            return
                        self._quick_exchanges[serial] = exchange
                try:
                    outcome = tool_outcome(self.caller(), call.spec, call.arguments, exchange)
                finally:
                    if exchange is not None:
                        with self._quick_lock:
                            self._quick_exchanges.pop(serial, None)
                data = call.answer(call_tool_result(*outcome))
            except Exception:
                log.exception("the quick path failed for %s", call.spec.name)
                data = encode_message({"jsonrpc": "2.0", "id": call.id, "error": {
                    "code": INTERNAL_ERROR, "message": f"Internal error: {call.spec.name} failed inside the MCP "
                    "server; whether the app carried it out is unknown: do not resend automatically"}})
            with self._quick_lock:
                if self._quick_live.pop(serial, None) is None:
                    log.debug("dropped the answer to request %r (%s): the host cancelled it, or the server is "
                              "exiting", call.id, call.spec.name)
                    return
                self._quick_lock.notify_all()
                self._write(data)  # under the lock: see `_quick_live`
        except OSError:
            log.exception("the stdio transport failed")
        finally:
            if call.waits:
                with self._quick_lock:
                    self._waits_running -= 1
                    self._quick_lock.notify_all()
                    # Under the lock: logged before anything waiting for this count (the end of stdin) goes on.
                    log.debug("the wait thread of request %r is free again (quick path: %d wait(s) running)", call.id,
                              self._waits_running)

    def _finish_quick(self) -> None:
        """Quick waits are abandoned at once (their exchanges aborted, their answers dropped); other quick calls
        under way get the same grace as the SDK's, then the rest are abandoned: their answers (their exchanges may
        end later) are dropped, and the pools are let go."""
        with self._quick_lock:
            waits = [serial for serial, call in self._quick_live.items() if call.waits]
            for serial in waits:
                del self._quick_live[serial]
            exchanges = [exchange for serial in waits if (exchange := self._quick_exchanges.pop(serial, None))]
        for exchange in exchanges:
            exchange.abort("the MCP server is exiting")
        if waits:
            log.debug("stdin ended: aborted %d wait(s) on the quick path", len(waits))
        with self._quick_lock:
            # The aborted waits' threads are free again within moments; the grace bounds that too.
            self._quick_lock.wait_for(lambda: not self._quick_live and not self._waits_running, timeout=EOF_GRACE_S)
            if self._quick_live:
                log.debug("abandoned %d quick call(s) still running at the end of the grace", len(self._quick_live))
            self._quick_live.clear()
            pools = [self._quick_pool, self._wait_pool]
            self._quick_pool = self._wait_pool = None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    def _reject(self, obj: dict[str, Any]) -> None:
        if "method" in obj and "id" in obj and obj["id"] != self.front.replay_id:
            line = encode_message({"jsonrpc": "2.0", "id": obj["id"], "error": {
                "code": INTERNAL_ERROR, "message": "Internal error: the MCP server could not start its SDK session"}})
            self.outstanding.answer(obj["id"], lambda: self._write(line))


def _watch_parent(on_death: Callable[[], None], poll_s: float = PARENT_POLL_S) -> threading.Thread:
    """Call `on_death` once, from a daemon thread, when the host (the MCP client that started this server) or the
    direct parent has died.

    A dead parent's children are re-parented (to init or a subreaper), so `os.getppid()` changes: polling it is
    portable and needs no privilege, and it does not matter who else holds stdin open (reliability-matrix M5 (c)).
    The parent may be a wrapper that outlives the host, though (a shell that does not exec, the PyInstaller onefile
    launcher): so the host, found once by walking up the ancestry (`_host.find_host`, on this thread so the walk,
    and psutil off Linux, cost the start nothing), is polled too, by pid and start time.
    Not PR_SET_PDEATHSIG: Linux sends that when the parent *thread* that spawned us exits, and hosts such as Codex
    spawn from short-lived threads. A parent or host that died before this runs is not seen (stdin EOF still ends
    the server). On Windows a process is never re-parented and no host is looked for, so this never fires; there
    the launcher's job object ends the server (`wardian.launcher`).
    """
    parent = os.getppid()

    def watch() -> None:
        from wardian.mcp._host import find_host

        try:
            host = find_host(parent)
        except Exception:  # the parent is still watched
            log.exception("could not tell the host process")
            host = None
        if host is None:
            log.info("no host found above the parent, pid %d: watching the parent only", parent)
        else:
            log.info("watching the host, pid %d (%s), and the parent, pid %d", host.pid, host.process.name, parent)
        while True:
            if os.getppid() != parent:
                log.info("the parent process (pid %d) has died: exiting as at the end of stdin", parent)
                break
            if host is not None and not host.running():
                log.info("the host process (pid %d) has died: exiting as at the end of stdin", host.pid)
                break
            time.sleep(poll_s)
        on_death()

    thread = threading.Thread(target=watch, name="wardian-mcp-parent", daemon=True)
    thread.start()
    return thread


def main() -> int:
    """Entry point of `wardian mcp serve`; returns the process exit code."""
    ended = threading.Event()  # stdin reached EOF, or the host or the parent died
    fds = _StdioFds()
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("WARDIAN_LOG_LEVEL", "WARNING").upper(),
                        format="wardian-mcp %(levelname)s %(name)s: %(message)s")
    watchdog = _watch_parent(ended.set)  # once logging is set up: its first line says which host it watches
    server = StdioServer(fds.write, dict(os.environ))
    server.start()
    failed = threading.Event()

    def read() -> None:
        # On a thread of its own, so the parent's death can end the server while a read blocks on a stdin that
        # another process keeps open.
        try:
            _reader(fds.stdin, server.deliver)
        except Exception:
            log.exception("the MCP server failed")
            failed.set()
        finally:
            ended.set()

    threading.Thread(target=read, name="wardian-mcp-stdin", daemon=True).start()
    code = 0
    try:
        ended.wait()
        server.finish()
    except KeyboardInterrupt:
        code = 130
    except Exception:
        log.exception("the MCP server failed")
        code = 1
    if failed.is_set() and code == 0:
        code = 1
    sys.stderr.flush()
    if any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread() and t is not watchdog):
        # The SDK thread is still importing, a worker thread is still blocked in an app exchange abandoned at EOF, or
        # the stdin thread is blocked reading a stdin that outlived the parent; the interpreter would wait at exit
        # for the non-daemon ones (up to an exchange's timeout) or tear an import down mid-way, so leave without
        # either.
        os._exit(code)
    return code
