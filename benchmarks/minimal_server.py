"""The least server that does what a durable send needs: the floor under `durable_sends_per_s_32_senders`.

Run as `python -m benchmarks.minimal_server SHAPE SOCKET DB` (the bench spawns it, `minimal_server_rate`): NDJSON
over a Unix socket, the app's own send operation on the app's own store (`admit_as`, as the store's ceiling runs it)
and the app's own answer (`send_result`, encoded by orjson), with the request's params validated by the app's own
model (`parse_params`), as every input must be. Nothing else: no task per connection, no future per request, no
cancel scopes, no wake-ups, no runtime. Frames are split and batches started in the protocol's callbacks. Two shapes
of group commit:

- `overlap`, the app's: a batch's statements on the event loop, its COMMIT on one worker thread while the loop reads
  the next requests, the next batch begun as soon as the COMMIT returned. With 32 senders that each wait for their
  answer, batches settle at half of them (the other half's requests arrive while a batch commits), so each COMMIT's
  fixed cost is spread over 16 sends rather than the ceiling's 32, and every batch pays the hand-over to the worker
  and back.
- `fill`: a batch waits until as many requests are pending as the previous batch held, at most `FILL_WAIT_S`, then
  runs its statements and its COMMIT on the loop. Batches stay at the number of senders, with no thread hop; a lone
  caller never waits (its previous batch held one). `fill_unvalidated` is the same without the validation: what the
  validation alone costs.

It answers `mailbox/receive` too, the floor under `receive_100_at_1m_cursor` (`benchmarks.cursor`): the app's params
model, the store's own receive on the app's store (marking what a page returns for the first time received, a
durable COMMIT), and the app's own answer (`receive_result`). A receive joins the batches as a send does; a lone
reader's batch holds one, so it never waits in `fill`, and its COMMIT runs on the loop as the app's writer runs a
call that finds it idle.

docs/benchmarks.md, "Against the least server", reads the app's figure against these.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import orjson

from wardian.app.service import admit_as
from wardian.app.service.mailbox import receive_page
from wardian.model import DEFAULT_RECEIVE_LIMIT, InteractionKind, Receipt, ReceivePage
from wardian.protocol.methods import (
    MailboxReceiveParams,
    MessageSendParams,
    parse_params,
    receive_result,
    send_result,
)
from wardian.store import BatchResult, Store, open_sqlite
from wardian.store.api import Call

# A request waiting for its batch: where to answer, its id, its operation, and how its value becomes the answer.
_Pending = tuple[asyncio.Transport, Any, Call, Callable[[Any], Any]]
SHAPES = ("fill", "overlap", "fill_unvalidated")
# How long a `fill` batch waits at most for as many requests as its predecessor held.
FILL_WAIT_S = 0.0005


class MinimalServer:
    """One writer over one store, in one of `SHAPES`; answers are written as soon as their COMMIT returned."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop, shape: str) -> None:
        self.store = store
        self.fill = shape.startswith("fill")
        self.validate = not shape.endswith("_unvalidated")
        self.last = 0  # the size of the previous batch (`fill`)
        self.timer: asyncio.TimerHandle | None = None
        self.kick_due = False
        self.loop = loop
        self.pending: list[_Pending] = []
        self.busy = False
        self.worker = concurrent.futures.ThreadPoolExecutor(1)
        self.batches = 0
        self.operations = 0  # sends and receives

    def submit(self, transport: asyncio.Transport, id_: Any, method: str, params: dict[str, Any]) -> None:
        if method == "mailbox/receive":
            self.pending.append((transport, id_, *_receive_op(params)))
            return
        if self.validate:
            p = parse_params("message/send", params)
            assert isinstance(p, MessageSendParams)
            session, target, message = p.session, p.target, p.message
        else:
            session, target, message = params["session"], params["target"], params["message"]
        self.pending.append((transport, id_, (admit_as, (session, target, InteractionKind.INFORMATION, message)),
                             _sent))

    def kick(self, *, waited: bool = False) -> None:
        """Begin the next batch unless one is committing (or, `fill`, it is still waiting for requests)."""
        if self.busy or not self.pending:
            return
        if self.fill and len(self.pending) < self.last and not waited:
            if self.timer is None:
                self.timer = self.loop.call_later(FILL_WAIT_S, self._waited)
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.busy = True
        batch, self.pending = self.pending, []
        begun = self.store.begin_batch([call for _, _, call, _ in batch], [True] * len(batch))
        if self.fill:
            self.last = len(batch)
            self.answer(batch, self.store.commit_batch(begun))
            return
        committing = self.loop.run_in_executor(self.worker, self.store.commit_batch, begun)
        committing.add_done_callback(lambda done: self.answer(batch, done.result()))

    def kick_soon(self) -> None:
        """Kick once the loop has run every read that is ready now, so a batch takes all of them (`fill`)."""
        if not self.kick_due:
            self.kick_due = True
            self.loop.call_soon(self._kick_now)

    def _kick_now(self) -> None:
        self.kick_due = False
        self.kick()

    def _waited(self) -> None:
        self.timer = None
        self.kick(waited=True)

    def answer(self, batch: list[_Pending], results: list[BatchResult]) -> None:
        self.batches += 1
        self.operations += len(batch)
        for (transport, id_, _, answer), result in zip(batch, results, strict=True):
            if result.error is None:
                message = {"jsonrpc": "2.0", "id": id_, "result": answer(result.value)}
            else:
                message = {"jsonrpc": "2.0", "id": id_, "error": {"code": -32000, "message": str(result.error)}}
            if not transport.is_closing():
                transport.write(orjson.dumps(message) + b"\n")
        self.busy = False
        self.kick()


def _sent(receipt: Receipt) -> Any:
    return send_result(receipt, "admitted")


def _receive_op(params: dict[str, Any]) -> tuple[Call, Callable[[ReceivePage], Any]]:
    """A receive as the app's handler runs it with no wait (`wardian.app.service.mailbox`), and its answer."""
    p = parse_params("mailbox/receive", params)
    assert isinstance(p, MailboxReceiveParams)
    assert not p.timeout_ms, "the least server answers at once: it has no waits"
    limit = p.limit if p.limit is not None else DEFAULT_RECEIVE_LIMIT

    def answer(page: ReceivePage) -> Any:
        return receive_result(page, cursor=page.cursor if page.cursor is not None else p.cursor, timed_out=False,
                              wake_reason=None)
    return (receive_page, (p.session, p.cursor, p.ack_cursor, limit)), answer


class _Connection(asyncio.Protocol):
    def __init__(self, server: MinimalServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.partial = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        *lines, self.partial = (self.partial + data).split(b"\n")
        for line in lines:
            request = orjson.loads(line)
            self.server.submit(self.transport, request["id"], request["method"], request["params"])
        if self.server.fill:
            self.server.kick_soon()
        else:
            self.server.kick()


async def serve(shape: str, socket_path: str, db_path: str) -> None:
    loop = asyncio.get_running_loop()
    store = open_sqlite(db_path)
    server = MinimalServer(store, loop, shape)
    old_umask = os.umask(0o177)  # 0600 as the app makes its socket: a client refuses one open to others
    try:
        listener = await loop.create_unix_server(lambda: _Connection(server), socket_path)
    finally:
        os.umask(old_umask)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    await stop.wait()
    listener.close()
    server.worker.shutdown()
    store.close()
    # The mean batch, for the bench's line: what the group commit settled at.
    print(f"{server.batches} {server.operations}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in SHAPES:
        sys.exit(f"usage: python -m benchmarks.minimal_server {{{','.join(SHAPES)}}} SOCKET DB")
    asyncio.run(serve(*sys.argv[1:]))
