"""A wait whose client goes away ends at once in the app (app/server.py): a closed or half-closed control connection
ends the waits in flight on it, they unsubscribe, and nothing more is read or written for them; a request that does
not wait still runs to its end. The CLI's interrupted wait is such a client."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import SocketAttribute

from tests.app.inprocess import World, world
from tests.app.observe import app_is_idle, app_waiting, eventually
from tests.conftest import AppHandle, wardian_cmd
from wardian.app.server import ControlServer
from wardian.store import roster

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _frame(id_: int, method: str, **params: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n"


async def _exchange(path: str, frame: bytes) -> dict[str, Any]:
    """One request on a connection of its own, and its answer."""
    async with await anyio.connect_unix(path) as conn:
        await conn.send(frame)
        data = b""
        while not data.endswith(b"\n"):
            data += await conn.receive()
    answer = orjson.loads(data)
    assert isinstance(answer, dict)
    return answer


async def _waiting(w: World, count: int) -> bool:
    return w.service.signals.waiting() == count


@pytest.mark.anyio
async def test_a_wait_whose_connection_closes_mid_wait_takes_no_provider_context() -> None:
    """The connection of a minute-long wait closes; then context is pushed into the waiter's conversation. The wait
    has ended and unsubscribed, so the context is still unseen: the next wait reports it."""
    async with world() as w:
        await w.call("agent/start", agent="worker")
        worker = roster.resolve_agent(w.store, "worker")
        token = roster.create_session(w.store, worker.id)
        path = str(w.service.home.root / "control.sock")
        listener = await anyio.create_unix_listener(path)
        after: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            await tg.start(ControlServer(w.service).serve, listener.extra(SocketAttribute.raw_socket))
            async with await anyio.connect_unix(path) as conn:
                await conn.send(_frame(1, "mailbox/wait", session=token, timeout_ms=60_000))
                await w.until(lambda: _waiting(w, 1), "the wait never subscribed")
            # A round trip on another connection: the app has read the closed connection's EOF by its end.
            assert (await _exchange(path, _frame(2, "app/status")))["result"]["running"] is True
            receipt = await w.call("message/send", session=w.lead, target="worker", message="FYI")
            assert receipt["delivery"] == "provider_visible"
            await w.until(lambda: _waiting(w, 0), "the wait of the closed connection stayed subscribed")
            after = await _exchange(path, _frame(3, "mailbox/wait", session=token, timeout_ms=0))
            tg.cancel_scope.cancel()
        await listener.aclose()
    assert after["result"] == {"woke": True, "timed_out": False, "wake_reason": "provider_context_available"}


@pytest.mark.anyio
async def test_a_half_closed_connection_ends_its_wait_but_still_gets_every_answer() -> None:
    """A client that sends a minute-long wait and a list, then half-closes: the wait ends at once as timed out (it
    acknowledged and consumed nothing), and both requests are answered, in order, before the app closes."""
    async with world() as w:
        worker = roster.resolve_agent(w.store, "worker")
        token = roster.create_session(w.store, worker.id)
        path = str(w.service.home.root / "control.sock")
        listener = await anyio.create_unix_listener(path)
        data, waiting = b"", -1
        async with anyio.create_task_group() as tg:
            await tg.start(ControlServer(w.service).serve, listener.extra(SocketAttribute.raw_socket))
            async with await anyio.connect_unix(path) as conn:
                await conn.send(_frame(1, "mailbox/receive", session=token, timeout_ms=60_000)
                                + _frame(2, "agent/list"))
                await conn.send_eof()
                with anyio.move_on_after(30):  # a bound: the answers come at once, or the wait outlived its client
                    while data.count(b"\n") < 2:
                        data += await conn.receive()
            waiting = w.service.signals.waiting()
            tg.cancel_scope.cancel()
        await listener.aclose()
    answers = [orjson.loads(line) for line in data.splitlines()]
    assert [a["id"] for a in answers] == [1, 2], "the wait outlived its half-closed connection"
    first, second = answers
    assert first["result"]["timed_out"] is True
    assert (first["result"]["records"], first["result"]["acked"]) == ([], 0)
    assert [a["name"] for a in second["result"]["agents"]] == ["lead", "worker"]
    assert waiting == 0


# Runs argv[1:] with SIGINT at its default disposition (exec keeps it).
_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                   "os.execvp(sys.argv[1], sys.argv[1:])")


@pytest.mark.parametrize("command", [("message", "wait"), ("message", "receive")])
def test_an_interrupted_cli_wait_exits_130_and_its_app_wait_ends(app: AppHandle, command: tuple[str, str]) -> None:
    """`wardian message wait|receive --timeout-ms 60000` sent SIGINT: exit code 130, no traceback, and the app's
    wait ends with the CLI's connection (no subscribed wait, no open connection)."""
    _, token = app.add_agent()
    # As a terminal runs it: SIGINT at its default. A test run started in the background of a shell without job
    # control inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored (so Ctrl-C would do nothing).
    proc = subprocess.Popen([sys.executable, "-c", _DEFAULT_SIGINT, *wardian_cmd(), *command, "--timeout-ms", "60000"],
                            env=app.env(token), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        eventually(lambda: app_waiting(app) == 1, "the CLI's wait to reach the app")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 130, err
    assert out == b""
    assert b"Traceback" not in err, err
    eventually(lambda: app_is_idle(app), "the app to end the interrupted CLI's wait", timeout_s=10)
