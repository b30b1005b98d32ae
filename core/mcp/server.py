"""`wardian mcp serve`: the seven messaging tools over stdio MCP, on the official SDK's low-level server.

```
stdin (dup of fd 0) -> reader thread -> decode_line -> SDK session (mcp.server.lowlevel.Server) -> writer
                                            `-> malformed line: JSON-RPC error ---------------------> writer
writer -> stdout (dup of fd 1)
```

Invariants:
- Nothing but protocol reaches the real stdout: at startup fd 1 is duplicated for the transport and then
  pointed at stderr, so a stray `print` or a chatty import cannot corrupt the stream (MCP stdio spec; STYLE
  §7). fd 0 is pointed at /dev/null for the same reason. Logs go to stderr only.
- Every malformed line gets a JSON-RPC error where the protocol allows one (`_frames`), and the server
  keeps serving.
- Discovery (`initialize`, `tools/list`) needs no WARDIAN_HOME, app or session and touches no file.
- Tool failures are results with `isError: true` and `structuredContent.error`; only protocol faults are
  JSON-RPC errors. A call is sent to the app at most once.
- Stdin EOF ends the server promptly: calls still running get a short grace, then are abandoned (an
  admitted message stays admitted; the app never cancels admitted work). SIGTERM keeps its default
  action, so it ends the process at once; the server starts no child processes.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from wardian.mcp._frames import FrameError, decode_line, encode_message
from wardian.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST
from wardian.protocol.tools import MAX_MCP_FRAME_BYTES

log = logging.getLogger("wardian.mcp")

# How long calls still running after stdin EOF may finish before the server exits anyway.
EOF_GRACE_S = 0.5
_READ_CHUNK = 1 << 16


class _StdioFds:
    """The private duplicates of fd 0 and fd 1 that carry the protocol once the real ones are diverted."""

    def __init__(self) -> None:
        self.stdin = os.dup(0)
        self.stdout = os.dup(1)
        # Stray writes to fd 1 (print, C extensions, children) now land on stderr; reads of fd 0 get EOF.
        os.dup2(2, 1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self.stdout, view)
            view = view[written:]


def _reader(fd: int, deliver: Callable[[bytes | None], None]) -> None:
    """Read lines from `fd` (in a daemon thread) and deliver each, then None at EOF.

    A line longer than MAX_MCP_FRAME_BYTES is delivered truncated to one byte over the cap (so it is
    answered as too long) and the rest of it is skipped up to its newline, keeping memory bounded.
    """
    buf = bytearray()
    skipping = False
    try:
        while True:
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                break
            buf += chunk
            while True:
                nl = buf.find(b"\n")
                if skipping:
                    if nl < 0:
                        buf.clear()
                        break
                    del buf[:nl + 1]
                    skipping = False
                    continue
                if nl < 0:
                    if len(buf) > MAX_MCP_FRAME_BYTES:
                        deliver(bytes(buf[:MAX_MCP_FRAME_BYTES + 1]))
                        buf.clear()
                        skipping = True
                    break
                line = bytes(buf[:nl])
                del buf[:nl + 1]
                deliver(line)
        if buf and not skipping:
            deliver(bytes(buf))
    except OSError:
        log.exception("reading stdin failed")
    except RuntimeError:
        return  # the event loop is gone: the server is exiting
    try:
        deliver(None)
    except RuntimeError:
        return


async def serve(fds: _StdioFds, environ: dict[str, str]) -> None:
    """Serve MCP on `fds` until stdin ends."""
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    from wardian import __version__, errors
    from wardian.mcp._calls import call_tool, error_content, success_content
    from wardian.protocol.tools import SERVER_INSTRUCTIONS, SERVER_NAME, TOOLS, TOOLS_BY_NAME

    listed = types.ListToolsResult(tools=[types.Tool.model_validate(t.definition(), by_name=False)
                                          for t in TOOLS])

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listed

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = TOOLS_BY_NAME.get(params.name)
        if spec is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name[:80]!r}")
        try:
            result = await anyio.to_thread.run_sync(partial(call_tool, spec, params.arguments, environ),
                                                    abandon_on_cancel=True)
        except errors.WardianError as exc:
            text, structured = error_content(exc)
            return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured,
                                        is_error=True)
        except Exception:
            log.exception("tool %s failed unexpectedly", spec.name)
            exc = errors.InternalError(f"{spec.name} failed inside the MCP server; whether the app carried it "
                                       "out is unknown: do not resend automatically")
            text, structured = error_content(exc)
            structured["error"]["delivery"] = "uncertain"
            return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured,
                                        is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=success_content(result))],
                                    structured_content=result)

    server: Server[Any] = Server(SERVER_NAME, version=__version__, instructions=SERVER_INSTRUCTIONS,
                                 on_list_tools=list_tools, on_call_tool=call)

    to_sdk: MemoryObjectSendStream[Any]
    from_host: MemoryObjectReceiveStream[Any]
    to_sdk, from_host = anyio.create_memory_object_stream[Any](0)
    to_host, from_sdk = anyio.create_memory_object_stream[Any](0)
    lines_in, lines = anyio.create_memory_object_stream[bytes | None](16)
    out_in, out = anyio.create_memory_object_stream[bytes](64)
    token = anyio.lowlevel.current_token()
    # Requests handed to the SDK and not yet answered: at stdin EOF they get a short grace to finish.
    pending: set[Any] = set()
    all_answered = anyio.Event()
    all_answered.set()

    def deliver(line: bytes | None) -> None:
        anyio.from_thread.run(lines_in.send, line, token=token)

    threading.Thread(target=_reader, args=(fds.stdin, deliver), name="wardian-mcp-stdin", daemon=True).start()

    async def pump_in() -> None:
        nonlocal all_answered
        async with lines:
            async for line in lines:
                if line is None:
                    return
                try:
                    obj = decode_line(line)
                    if obj is None:
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
                    except ValidationError:
                        raise FrameError(INVALID_REQUEST, "Invalid request: not a valid JSON-RPC message",
                                         obj.get("id")) from None
                except FrameError as exc:
                    await out_in.send(encode_message(exc.response()))
                    continue
                if "method" in obj and "id" in obj:
                    if not pending:
                        all_answered = anyio.Event()
                    pending.add(obj["id"])
                await to_sdk.send(SessionMessage(message))

    async def pump_out() -> None:
        async with from_sdk:
            async for session_message in from_sdk:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await out_in.send(data.encode("utf-8") + b"\n")
                answered = getattr(session_message.message, "id", None)
                if answered in pending and not hasattr(session_message.message, "method"):
                    pending.discard(answered)
                    if not pending:
                        all_answered.set()

    async def writer() -> None:
        async with out:
            async for data in out:
                fds.write(data)

    session_done = anyio.Event()

    async def run_session() -> None:
        try:
            async with anyio.create_task_group() as session_tg:
                session_tg.start_soon(pump_out)
                await server.run(from_host, to_host, server.create_initialization_options())
                session_tg.cancel_scope.cancel()
        finally:
            session_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        async with anyio.create_task_group() as session:
            session.start_soon(run_session)
            await pump_in()
            # stdin ended: calls in flight get a short grace to answer, then the session stops.
            with anyio.move_on_after(EOF_GRACE_S):
                await all_answered.wait()
            await to_sdk.aclose()
            with anyio.move_on_after(EOF_GRACE_S):
                await session_done.wait()
            session.cancel_scope.cancel()
        out_in.close()  # the writer drains what is queued, then ends


def main() -> int:
    """Entry point of `wardian mcp serve`; returns the process exit code."""
    fds = _StdioFds()
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("WARDIAN_LOG_LEVEL", "WARNING").upper(),
                        format="wardian-mcp %(levelname)s %(name)s: %(message)s")
    code = 0
    try:
        anyio.run(serve, fds, dict(os.environ))
    except KeyboardInterrupt:
        code = 130
    except Exception:
        log.exception("the MCP server failed")
        code = 1
    sys.stderr.flush()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        # A worker thread is still blocked in an app exchange abandoned at EOF; the interpreter would wait
        # for it at exit (up to the exchange's timeout), so leave without joining it.
        os._exit(code)
    return code
