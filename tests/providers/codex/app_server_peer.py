"""Codex's app-server played in this process for one connection of an attached runtime, in its own JSON-RPC lines:
for the orders real Codex will not produce on demand (when a TUI's thread is announced, how a turn's start and end
interleave with a subscription). The runtime's real client reads the lines, and its real observation and follower
run on them, as `CodexRuntime.run` has them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson

from wardian.providers.codex.app_server import AppServerClient
from wardian.providers.codex.launch import AppServerSpec
from wardian.providers.codex.runtime import CodexRuntime

IDLE = {"type": "idle"}


class AppServerPeer:
    """The connection's far end (a `MessageStream`): `send` is each request the runtime writes, answered by the
    subclass; `line` writes what the runtime's client reads next."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[bytes](100)

    def line(self, message: dict[str, Any]) -> None:
        self._send.send_nowait(orjson.dumps(message))

    def announce_thread(self, thread_id: str) -> None:
        """The TUI started `thread_id` (the app-server announces it to every connection)."""
        self.line({"method": "thread/started", "params": {"thread": {
            "id": thread_id, "ephemeral": False, "threadSource": "user", "status": IDLE, "turns": []}}})

    async def send(self, message: bytes) -> None:
        raise NotImplementedError

    async def receive(self) -> bytes:
        return await self._receive.receive()

    async def aclose(self) -> None:
        self._send.close()

    def close(self) -> None:
        self._send.close()
        self._receive.close()


def attached_runtime(thread_id: str | None) -> CodexRuntime:
    """An attached runtime of agent `worker` on `thread_id` that runs no process (its client is the test's)."""
    spec = AppServerSpec(name="worker", codex="codex", codex_home=Path("/nonexistent"), workspace=Path("/nonexistent"),
                         overrides=(), env={}, thread_id=thread_id, capabilities=None,  # type: ignore[arg-type]
                         stderr_path=Path("/nonexistent"), mode="attached")
    return CodexRuntime(spec)


@asynccontextmanager
async def connected(runtime: CodexRuntime, peer: AppServerPeer) -> AsyncIterator[AppServerClient]:
    """The runtime's client on `peer`, with the runtime observing it and following the TUI's threads; on exit all of
    it ends and the runtime's streams are closed (nothing else closes them: the runtime never ran)."""
    client = AppServerClient(peer, name="codex:worker", tap=runtime._tui.saw)  # as `CodexRuntime.run` makes it
    runtime.client = client
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(client.run)
            tg.start_soon(runtime._watch, client)
            tg.start_soon(runtime._follow_tui, client)
            yield client
            tg.cancel_scope.cancel()
    finally:
        await client.aclose()
        peer.close()
        runtime._stream.close()
        runtime.events.close()
        runtime._tui.close()
