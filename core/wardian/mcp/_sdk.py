"""The SDK's side of `wardian mcp serve`: the official SDK's low-level server of the eight tools, and one session of
it fed by the stdin thread and answering through the server's writes.

Importing this module imports the SDK (over a second): only the SDK thread (`_bridge.run_sdk`) and tests do.

Invariants:
- What the SDK's models refuse is answered here as the frame decoder would (INVALID_REQUEST), except a response of
  the host's: its id is in the host's own id space, so an error carrying it could be taken for the answer to the
  host's request of that id.
- Every answer to a host's request goes through `Outstanding.answer`, so a request the host cancelled is never
  answered; the answer to the replayed `initialize` (`_front`) is never written, only compared with the constant
  one that was.
- A wait the SDK cancels has its exchange aborted at once (anyio abandons its thread), not when the app answers it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from pydantic import ValidationError

from wardian import __version__
from wardian.mcp._book import EOF_GRACE_S, Outstanding, SdkWaits
from wardian.mcp._bridge import Inbox
from wardian.mcp._calls import Caller, WaitExchange, tool_outcome
from wardian.mcp._frames import FrameError, encode_message
from wardian.mcp._front import Front
from wardian.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST
from wardian.protocol.tools import SERVER_INSTRUCTIONS, SERVER_NAME, TOOLS, TOOLS_BY_NAME

log = logging.getLogger("wardian.mcp")

# Messages the SDK's loop buffers before the stdin thread waits for it to catch up.
SDK_BUFFER = 16


def build_server(caller: Caller, waits: SdkWaits | None = None) -> Server[Any]:
    """The SDK's low-level server of the eight tools, calling the app for `caller`; its waits are tracked in `waits`
    (a private tracker when None)."""
    listed = types.ListToolsResult(tools=[types.Tool.model_validate(t.definition(), by_name=False)
                                          for t in TOOLS])
    tracked = waits if waits is not None else SdkWaits(None)

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
            with tracked.track(request_id, WaitExchange()) as exchange:
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


class SdkSession:
    """One SDK session on this thread's loop: messages from `inbox` in, the SDK's messages out through `write`.

    Made on the loop (it takes the loop's token for the stdin thread's sends).
    """

    def __init__(self, write: Callable[[bytes], None], caller: Caller, inbox: Inbox, outstanding: Outstanding,
                 front: Front, waits: SdkWaits) -> None:
        self._write = write
        self._caller = caller
        self._inbox = inbox
        self._outstanding = outstanding
        self._front = front
        self._server = build_server(caller, waits)
        self._to_sdk: MemoryObjectSendStream[Any]
        self._from_host: MemoryObjectReceiveStream[Any]
        self._to_sdk, self._from_host = anyio.create_memory_object_stream[Any](0)
        self._to_host, self._from_sdk = anyio.create_memory_object_stream[Any](0)
        self._inbox_in, self._inbox_out = anyio.create_memory_object_stream[dict[str, Any] | None](SDK_BUFFER)
        self._token = anyio.lowlevel.current_token()
        self._session_done = anyio.Event()

    async def serve(self) -> None:
        """Serve until stdin ends, then give the calls in flight their grace."""
        try:
            async with anyio.create_task_group() as session:
                session.start_soon(self._run_session)
                await self._pump_in()
                # stdin ended: calls in flight get a short grace to answer, then the session stops.
                if self._outstanding:
                    await anyio.to_thread.run_sync(self._outstanding.wait_idle, EOF_GRACE_S)
                await self._to_sdk.aclose()
                with anyio.move_on_after(EOF_GRACE_S):
                    await self._session_done.wait()
                session.cancel_scope.cancel()
        finally:
            # Both ends of the inbox (a later `Inbox.put` fails and rejects its request instead). Left open, they
            # leaked (ResourceWarnings) once per connection served in a process: found by the frame fuzz target.
            self._inbox_in.close()
            self._inbox_out.close()
            self._caller.close()

    async def _run_session(self) -> None:
        try:
            async with anyio.create_task_group() as session_tg:
                session_tg.start_soon(self._pump_out)
                await self._server.run(self._from_host, self._to_host, self._server.create_initialization_options())
                session_tg.cancel_scope.cancel()
        finally:
            self._session_done.set()

    async def _pump_in(self) -> None:
        backlog = self._inbox.attach(lambda item: anyio.from_thread.run(self._inbox_in.send, item, token=self._token))
        log.debug("the SDK server is ready; %d message(s) were waiting for it", len(backlog))
        for obj in backlog:
            if obj is None:
                return
            await self._to_session(obj)
        async with self._inbox_out:
            async for obj in self._inbox_out:
                if obj is None:
                    return
                await self._to_session(obj)

    async def _to_session(self, obj: dict[str, Any]) -> None:
        try:
            message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
        except ValidationError:
            self._refuse(obj)
            return
        metadata = None
        if "method" in obj and "id" in obj:
            # The SDK ends a request the host cancelled without answering it, and says so through this hook: the
            # one sign that a cancelled request is settled (`Outstanding`).
            request_id = obj["id"]

            async def settled() -> None:
                self._outstanding.unanswered(request_id)

            metadata = ServerMessageMetadata(on_request_unanswered=settled)
        await self._to_sdk.send(SessionMessage(message, metadata=metadata))

    def _refuse(self, obj: dict[str, Any]) -> None:
        """Answer a message the SDK's models refuse."""
        if "method" not in obj:
            # A response of the host's (to no request of ours: the server sends none) that the SDK's models refuse.
            # Never answered: its id is in the host's own id space, so an error carrying it could be taken for the
            # answer to the host's request of that id (found with the frame fuzz target).
            log.warning("dropped a malformed response from the host (id %r)", obj.get("id"))
            return
        error = FrameError(INVALID_REQUEST, "Invalid request: not a valid JSON-RPC message", obj.get("id"))
        line = encode_message(error.response())
        if "id" in obj:
            self._outstanding.answer(obj["id"], lambda: self._write(line))
        else:
            self._write(line)

    async def _pump_out(self) -> None:
        async with self._from_sdk:
            async for session_message in self._from_sdk:
                message = session_message.message
                data = message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
                answered_id = getattr(message, "id", None)
                is_response = not hasattr(message, "method")
                if is_response and answered_id == self._front.replay_id:
                    result = orjson.loads(data).get("result")
                    if not self._front.replay_matches(result):
                        log.error("the SDK's initialize result differs from the constant answer written to the "
                                  "host: %s", data[:2000].decode("utf-8", "replace"))
                    continue
                if is_response and answered_id is not None:
                    self._outstanding.answer(answered_id, partial(self._write, data + b"\n"))
                else:
                    self._write(data + b"\n")


def serve_sdk(write: Callable[[bytes], None], get_caller: Callable[[], Caller], inbox: Inbox,
              outstanding: Outstanding, front: Front, waits: SdkWaits) -> None:
    """Run the SDK session on an event loop of this thread's own, fed by `inbox`, until stdin ends."""

    async def serve() -> None:
        await SdkSession(write, get_caller(), inbox, outstanding, front, waits).serve()  # made on the loop

    anyio.run(serve)
