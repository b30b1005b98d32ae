"""One tool call: arguments -> app params (plus the caller's session) -> one app exchange -> result or error.

Blocking by design (it uses the synchronous `AppClient`); the server runs it in a worker thread. Connections to
the app are kept in a small pool (`AppConnections`) instead of one new connection per call: a fresh Unix-socket
connection (connect, the app's peer check, its transport set-up) cost about 0.4 ms of a ~0.8 ms `list_agents`
exchange (#3 bench).

Invariants:
- A call is sent at most once: a lost answer is reported as `DeliveryUncertain` and never replayed (seed,
  "Tool contract"). The one retry is of a request of which no byte was written (`TransportError`) on a
  connection taken from the pool, which the app may have closed while it sat idle (an app restart); the retry
  runs on a new connection, and its failure is final.
- A connection is shared by no two calls at once (an `AppClient` is not thread-safe), and one that failed
  mid-exchange is discarded, never pooled again: only a clean answer (a result or the app's own error) returns
  it to the pool.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel

from wardian import errors
from wardian.client import AppClient
from wardian.home import ENV_HOME, ENV_SESSION, Home, resolve_home
from wardian.protocol.app import parse_params
from wardian.protocol.tools import ToolSpec

log = logging.getLogger("wardian.mcp")

# Arguments the server supplies itself; a caller that passes one is told it is not an argument.
_RESERVED = ("session",)
# Idle connections kept per server process: calls run concurrently only while waits are in flight.
MAX_IDLE_CONNECTIONS = 4


class AppConnections:
    """A pool of reusable connections to the running app of one home (thread-safe)."""

    def __init__(self, home: Home, max_idle: int = MAX_IDLE_CONNECTIONS) -> None:
        self.home = home
        self._max_idle = max_idle
        self._idle: list[AppClient] = []
        self._lock = threading.Lock()
        self._closed = False
        self.opened = 0  # connections created so far (tests check reuse with it)

    def call(self, method: str, params: dict[str, Any], timeout_ms: int | None = None) -> Any:
        """One exchange on a pooled connection (`AppClient.call`, or `call_wait` when `timeout_ms` is given).

        Raises:
            TransportError: nothing was written (the app is not running or is incompatible).
            DeliveryUncertain: the request left, but its answer did not arrive in time or intact.
            WardianError: the app's own error for this request.
        """
        client, reused = self._take()
        try:
            return self._exchange(client, method, params, timeout_ms)
        except errors.TransportError:
            client.close()
            if not reused:
                raise
        # Nothing of the request left on the pooled connection: the app closed it while it was idle. Send it
        # once, on a new connection (`_take` hands out only pooled ones first, so make one directly).
        client = self._new()
        return self._exchange(client, method, params, timeout_ms)

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

    def _exchange(self, client: AppClient, method: str, params: dict[str, Any], timeout_ms: int | None) -> Any:
        clean = False
        try:
            result = (client.call(method, params) if timeout_ms is None
                      else client.call_wait(method, params, timeout_ms))
            clean = True
            return result
        except (errors.TransportError, errors.DeliveryUncertain):
            raise
        except errors.WardianError:
            clean = True  # the app's own answer, read whole: the connection is fine
            raise
        finally:
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

    def call_tool(self, spec: ToolSpec, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run `spec` for this caller and return the app's result.

        Raises:
            MissingSession: WARDIAN_SESSION_ID is unset or empty.
            AppNotRunning: WARDIAN_HOME is unset, or no app runs for it (nothing was sent).
            DeliveryUncertain: the request left but its answer was lost; do not resend.
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
        result = self.connections().call(spec.method, params, timeout_ms)
        if not isinstance(result, dict):
            raise errors.DeliveryUncertain(f"the app answered {spec.method} with a malformed result; do not resend "
                                           "automatically", method=spec.method)
        return result


def tool_params(spec: ToolSpec, arguments: Mapping[str, Any] | None,
                session: str) -> tuple[dict[str, Any], BaseModel]:
    """The app params of a call of `spec` (the arguments plus `session`) and their validated model.

    Whatever this accepts satisfies `spec.input_schema` (reliability-matrix P4): the app's own validators (the
    same error for the same mistake, a non-empty cursor included).

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


def tool_outcome(caller: Caller, spec: ToolSpec,
                 arguments: Mapping[str, Any] | None) -> tuple[str, dict[str, Any], bool]:
    """Run one tool call to its result: (text block, structuredContent, isError). Never raises.

    The one definition of a tool result, for both paths of the server: the SDK's handler and the quick path of
    `_front` (which writes it with `call_tool_result`).
    """
    try:
        result = caller.call_tool(spec, arguments)
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
    """The text block and `structuredContent` of a tool error (reliability-matrix Part 2)."""
    data = exc.to_data()
    text = f"{exc.code}: {exc.message} (delivery: {data['delivery']})"
    if exc.allowed:
        text += f"; allowed: {exc.allowed}"
    return text, {"error": data}
