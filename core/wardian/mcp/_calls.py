"""One tool call: arguments -> app params (plus the caller's session) -> one app exchange -> result or error.

Blocking by design (it uses the synchronous `AppClient`); the server runs it in a worker thread. Connections to
the app are kept in a small pool (`AppConnections`) instead of one new connection per call: a fresh Unix-socket
connection (connect, the app's peer check, its transport set-up) cost about 0.4 ms of a ~0.8 ms `list_agents`
exchange (`mcp_roundtrip_list_agents`, docs/benchmarks.md).

Invariants:
- A call is sent at most once: a lost answer is reported as `DeliveryUncertain` and never replayed (contract rule
  UNC-1, docs/design/contract.md). The one retry is of a request of which no byte was written on a connection taken
  from the pool, which the app may have closed while it sat idle (its idle bound, an app restart): `AppClient` makes
  it for a plain call; for a wait, whose exchange another thread may abort by shutting the connection down (which
  fails the write the same way), the pool makes it unless the exchange was aborted. It runs on a new connection, and
  its failure is final.
- A connection is shared by no two calls at once (an `AppClient` is not thread-safe), and one that failed
  mid-exchange is discarded, never pooled again: only a clean answer (a result or the app's own error) returns
  it to the pool.
- Only a wait's exchange can be aborted (`WaitExchange`: a call with a timeout, `mailbox/wait` or `mailbox/receive`),
  and an aborted one is never retried and its connection never pooled. A wait consumes nothing, and a receive's
  `ack_cursor` is applied in its first read or not at all; the app ends a wait whose connection ends (app/server.py).
  A call that does not wait keeps its exchange to the end: aborting a send could leave its delivery uncertain.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel

from wardian import errors
from wardian.client import AppClient
from wardian.home import ENV_HOME, ENV_SESSION, Home, resolve_home
from wardian.protocol.methods import parse_params
from wardian.protocol.tools import ToolSpec

if TYPE_CHECKING:
    from wardian.pipes import Abort

log = logging.getLogger("wardian.mcp")

# Arguments the server supplies itself; a caller that passes one is told it is not an argument.
_RESERVED = ("session",)
# Idle connections kept per server process: calls run concurrently only while waits are in flight.
MAX_IDLE_CONNECTIONS = 4


class WaitExchange:
    """The app exchange of one wait, which another thread may abort: the host cancelled the wait, or the server is
    exiting (thread-safe).

    Aborting shuts the exchange's connection down (`socket.shutdown`, on a duplicate of its descriptor that this
    object owns, so it can never reach a descriptor the calling thread has closed and the system reused): the recv
    blocked on it returns at once, the call fails, and its connection is discarded. The app sees the connection end
    and ends the wait too (app/server.py). An exchange aborted before it began never sends its request.
    """

    __slots__ = ("_lock", "_sock", "reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | Abort | None = None  # Abort: a Windows pipe's (wardian.pipes)
        self.reason: str | None = None  # why it was aborted; None while it is not

    @property
    def aborted(self) -> bool:
        return self.reason is not None

    def abort(self, reason: str) -> None:
        """End the exchange now, from any thread; idempotent (the first reason stays)."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            if self._sock is not None:
                with suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)

    def attach(self, client: AppClient) -> bool:
        """Make `client`'s exchange abortable (it connects first); False when the exchange was aborted already
        (`AppConnections`, before the request is sent)."""
        sock = client.connect().dup()
        with self._lock:
            if self.reason is None:
                self._sock = sock
                return True
        sock.close()
        return False

    def detach(self) -> bool:
        """The exchange is over: from now on an abort no longer reaches its connection (`AppConnections`, before
        the connection is pooled or closed). Whether it was aborted."""
        with self._lock:
            sock, self._sock = self._sock, None
            aborted = self.reason is not None
        if sock is not None:
            sock.close()
        return aborted

    def error(self, method: str) -> errors.DeliveryUncertain:
        return errors.DeliveryUncertain(f"{method} was aborted ({self.reason}): the wait ended without an answer; "
                                        "a receive may or may not have acknowledged its ack_cursor", method=method)


class AppConnections:
    """A pool of reusable connections to the running app of one home (thread-safe)."""

    def __init__(self, home: Home, max_idle: int = MAX_IDLE_CONNECTIONS) -> None:
        self.home = home
        self._max_idle = max_idle
        self._idle: list[AppClient] = []
        self._lock = threading.Lock()
        self._closed = False
        self.opened = 0  # connections created so far (tests check reuse with it)

    def call(self, method: str, params: dict[str, Any], timeout_ms: int | None = None,
             exchange: WaitExchange | None = None) -> Any:
        """One exchange on a pooled connection (`AppClient.call`, or `call_wait` when `timeout_ms` is given), which
        `exchange`, if given, can abort.

        Raises:
            TransportError: nothing was written (the app is not running or is incompatible).
            DeliveryUncertain: the request left, but its answer did not arrive in time or intact, or `exchange`
                was aborted.
            WardianError: the app's own error for this request.
        """
        client, reused = self._take()
        try:
            return self._exchange(client, method, params, timeout_ms, exchange)
        except errors.TransportError:
            client.close()
            if not reused or exchange is None or exchange.aborted:
                raise  # a plain call's client has reconnected already, if that could help
        # Nothing of the wait's request left on the pooled connection: the app closed it while it was idle. Send it
        # once, on a new connection (`_take` hands out only pooled ones first, so make one directly).
        client = self._new()
        return self._exchange(client, method, params, timeout_ms, exchange)

    def close(self) -> None:
        """Close the idle connections, and from now on every connection once its call is over (a call still
        running, e.g. abandoned by a cancel or at stdin EOF, may finish later: its connection must not be pooled
        where nothing would close it)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for client in idle:
            client.close()

    def _take(self) -> tuple[AppClient, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(), False

    def _new(self) -> AppClient:
        with self._lock:
            self.opened += 1
        return AppClient(self.home)

    def _exchange(self, client: AppClient, method: str, params: dict[str, Any], timeout_ms: int | None,
                  exchange: WaitExchange | None) -> Any:
        if exchange is not None and not exchange.attach(client):
            self._give_back(client)  # unused, and clean
            log.debug("the exchange of %s was aborted before it began (%s)", method, exchange.reason)
            raise exchange.error(method)
        clean = False
        try:
            reconnect = exchange is None  # an aborted exchange's shut-down connection must not be replaced
            result = (client.call(method, params, reconnect=reconnect) if timeout_ms is None
                      else client.call_wait(method, params, timeout_ms, reconnect=reconnect))
            clean = True
            return result
        except (errors.TransportError, errors.DeliveryUncertain):
            if exchange is not None and exchange.aborted:
                raise exchange.error(method) from None
            raise
        except errors.WardianError:
            clean = True  # the app's own answer, read whole: the connection is fine
            raise
        finally:
            if exchange is not None and exchange.detach():
                clean = False  # shut down, or about to be: never pooled
                log.debug("the aborted exchange of %s ended (%s)", method, exchange.reason)
            if clean:
                self._give_back(client)
            else:
                client.close()

    def _give_back(self, client: AppClient) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(client)
                return
        client.close()


class Caller:
    """The managed caller of one `wardian mcp serve` process: its environment and its connections to the app."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self._connections: AppConnections | None = None
        self._lock = threading.Lock()

    def connections(self) -> AppConnections:
        with self._lock:
            if self._connections is None:
                self._connections = AppConnections(resolve_home(self.environ[ENV_HOME]))
            return self._connections

    def close(self) -> None:
        """Close the connections to the app; a later call still works, on a connection closed after it."""
        with self._lock:
            connections = self._connections
        if connections is not None:
            connections.close()

    def announce(self) -> None:
        """Tell the app this server has listed its tools to the agent (`session/announce`): an ACP agent connects its
        MCP servers after its session exists, and the app sends it no task before this (docs/guide/acp.md).

        Raises:
            WardianError: no session or app, or the app's own error (the caller logs it: a task then waits for the
                agent's start to time out, never goes to an agent without its tools).
        """
        session = self.environ.get(ENV_SESSION, "")
        if not session or not self.environ.get(ENV_HOME):
            raise errors.MissingSession(f"{ENV_SESSION} or {ENV_HOME} is not set; nothing to announce")
        self.connections().call("session/announce", {"session": session})

    def call_tool(self, spec: ToolSpec, arguments: Mapping[str, Any] | None,
                  exchange: WaitExchange | None = None) -> dict[str, Any]:
        """Run `spec` for this caller and return the app's result; `exchange` can abort it if it is a wait (a call
        with a timeout; any other call ignores it and runs to its end).

        Raises:
            MissingSession: WARDIAN_SESSION_ID is unset or empty.
            AppNotRunning: WARDIAN_HOME is unset, or no app runs for it (nothing was sent).
            DeliveryUncertain: the request left but its answer was lost, or the wait was aborted; do not resend.
            WardianError: the argument's or the app's own error.
        """
        params, valid = tool_params(spec, arguments, self.environ.get(ENV_SESSION, ""))
        if not self.environ.get(ENV_HOME):
            raise errors.AppNotRunning(
                f"{ENV_HOME} is not set in this MCP server's environment: set it to the home of the running app "
                "(start the app with `wardian app start`)", field="home")
        timeout_ms: int | None = None
        if spec.wait_argument is not None:
            timeout = getattr(valid, spec.wait_argument)
            timeout_ms = spec.wait_default_ms if timeout is None else timeout
        result = self.connections().call(spec.method, params, timeout_ms, exchange if timeout_ms else None)
        if not isinstance(result, dict):
            raise errors.DeliveryUncertain(f"the app answered {spec.method} with a malformed result; do not resend "
                                           "automatically", method=spec.method)
        return result


def tool_params(spec: ToolSpec, arguments: Mapping[str, Any] | None,
                session: str) -> tuple[dict[str, Any], BaseModel]:
    """The app params of a call of `spec` (the arguments plus `session`) and their validated model.

    Whatever this accepts satisfies `spec.input_schema` (reliability row P4, docs/reliability.md): the app's own
    validators (the same error for the same mistake, a non-empty cursor included).

    Raises:
        InvalidArguments: a reserved argument (`session`) was passed.
        MissingSession: `session` is empty.
        WardianError: the argument's own error (`invalid_limit`, `invalid_cursor`, ...).
    """
    args = dict(arguments or {})
    for name in _RESERVED:
        if name in args:
            raise errors.InvalidArguments(
                f"unknown argument {name!r}: the caller is the managed agent of this MCP server's "
                f"{ENV_SESSION}", field=name)
    if not session:
        raise errors.MissingSession(
            f"no managed caller: set {ENV_SESSION} in this MCP server's environment (print one with "
            "`wardian agent env NAME`)", field="session")
    params = {**args, "session": session}
    valid = parse_params(spec.method, params)
    return params, valid


def tool_outcome(caller: Caller, spec: ToolSpec, arguments: Mapping[str, Any] | None,
                 exchange: WaitExchange | None = None) -> tuple[str, dict[str, Any], bool]:
    """Run one tool call to its result: (text block, structuredContent, isError). Never raises. `exchange` can
    abort a wait (`Caller.call_tool`).

    The one definition of a tool result, for both paths of the server: the SDK's handler and the quick path of
    `_front` (which writes it with `call_tool_result`).
    """
    try:
        result = caller.call_tool(spec, arguments, exchange)
    except errors.WardianError as exc:
        text, structured = error_content(exc)
        return text, structured, True
    except Exception:
        log.exception("tool %s failed unexpectedly", spec.name)
        exc = errors.InternalError(f"{spec.name} failed inside the MCP server; whether the app carried it "
                                   "out is unknown: do not resend automatically")
        text, structured = error_content(exc)
        structured["error"]["delivery"] = "uncertain"
        return text, structured, True
    return success_content(result), result, False


def call_tool_result(text: str, structured: dict[str, Any], is_error: bool) -> dict[str, Any]:
    """A `CallToolResult` as the SDK writes it (mcp 2.3.0: content, isError, structuredContent; a test compares)."""
    return {"content": [{"text": text, "type": "text"}], "isError": is_error, "structuredContent": structured}


def success_content(result: dict[str, Any]) -> str:
    """The text block of a successful result: the structured result as compact JSON."""
    return orjson.dumps(result).decode("utf-8")


def error_content(exc: errors.WardianError) -> tuple[str, dict[str, Any]]:
    """The text block and `structuredContent` of a tool error (contract rule MCP-4, docs/design/contract.md)."""
    data = exc.to_data()
    text = f"{exc.code}: {exc.message} (delivery: {data['delivery']})"
    if exc.allowed:
        text += f"; allowed: {exc.allowed}"
    return text, {"error": data}
