"""Drive `wardian mcp serve` from synchronous tests: the SDK's own stdio client, and a raw line-level peer.

The SDK client runs on an event loop in a blocking portal thread, so a module-scoped fixture can keep one
server process per agent alive across tests. Servers are launched as `[*wardian_cmd(), "mcp", "serve"]`,
so the same tests can run against a frozen executable (WARDIAN_TEST_CLI).
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import Any

import mcp_types as types
import orjson
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import wardian_cmd

SERVE = ("mcp", "serve")


def serve_command() -> list[str]:
    return [*wardian_cmd(), *SERVE]


def server_env(home: str | None = None, session: str | None = None, **extra: str) -> dict[str, str]:
    """The server's environment: nothing of the test process's WARDIAN_* leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    if home is not None:
        env["WARDIAN_HOME"] = home
    if session is not None:
        env["WARDIAN_SESSION_ID"] = session
    env.update(extra)
    return env


class McpConnection:
    """One initialized SDK client session with one `wardian mcp serve` process."""

    def __init__(self, portal: BlockingPortal, session: ClientSession, stderr_path: str) -> None:
        self._portal = portal
        self.session = session
        self.stderr_path = stderr_path

    def list_tools(self) -> types.ListToolsResult:
        return self._portal.call(self.session.list_tools)

    def ping(self) -> types.EmptyResult:
        return self._portal.call(self.session.send_ping)

    def call(self, name: str, arguments: dict[str, Any] | None = None, *,
             read_timeout_s: float | None = None) -> types.CallToolResult:
        return self._portal.call(partial(self.session.call_tool, name, arguments,
                                         read_timeout_seconds=read_timeout_s))

    def start(self, name: str, arguments: dict[str, Any] | None = None) -> Future[types.CallToolResult]:
        """Start a call without waiting for it (for waits that another call should end)."""
        return self._portal.start_task_soon(self.session.call_tool, name, arguments)

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool that must succeed; its structured result."""
        result = self.call(name, arguments)
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        return result.structured_content

    def error(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool that must fail with a tool error; its `structuredContent.error`."""
        result = self.call(name, arguments)
        assert result.is_error, result.structured_content
        assert isinstance(result.structured_content, dict)
        error = result.structured_content["error"]
        assert error["delivery"] in ("not_admitted", "admitted", "uncertain")
        return error

    def stderr(self) -> str:
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()


@asynccontextmanager
async def _open(env: dict[str, str], errlog: Any) -> AsyncIterator[ClientSession]:
    cmd = serve_command()
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextmanager
def mcp_server(env: dict[str, str]) -> Iterator[McpConnection]:
    """Spawn `wardian mcp serve` with `env` and yield an initialized SDK client session."""
    with tempfile.NamedTemporaryFile("w+", encoding="utf-8", prefix="wardian-mcp-err", suffix=".log",
                                     delete=False) as errlog:
        try:
            with start_blocking_portal() as portal, portal.wrap_async_context_manager(_open(env, errlog)) as s:
                yield McpConnection(portal, s, errlog.name)
        finally:
            os.unlink(errlog.name)


class RawServer:
    """`wardian mcp serve` spoken to line by line, for what the SDK client never sends."""

    def __init__(self, env: dict[str, str], cwd: str | None = None, stderr: Any = subprocess.PIPE) -> None:
        """`stderr` may be a file instead of a pipe, for a test that reads the server's log while it runs (a pipe is
        read only by `close`, and a chatty server would block on a full one)."""
        self.proc = subprocess.Popen(serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, env=env, cwd=cwd, start_new_session=True)
        self._buf = b""
        self.stdout_lines: list[bytes] = []

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(orjson.dumps(message) + b"\n")

    def read(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next stdout line, which must be one JSON object."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, f"no answer within {timeout} s"
            chunk = os.read(fd, 1 << 16)
            assert chunk, "the server closed stdout"
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        self.stdout_lines.append(line)
        message = orjson.loads(line)
        assert isinstance(message, dict)
        return message

    def request(self, id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.read()

    def initialize(self) -> dict[str, Any]:
        answer = self.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                "clientInfo": {"name": "wardian-tests", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def close(self, timeout: float = 10.0) -> tuple[int, bytes, bytes]:
        """Close stdin and collect the rest of stdout and stderr; the exit code."""
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, self._buf + out, err or b""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=10)


@contextmanager
def raw_server(env: dict[str, str], cwd: str | None = None, stderr: Any = subprocess.PIPE) -> Iterator[RawServer]:
    server = RawServer(env, cwd, stderr)
    try:
        yield server
    finally:
        server.kill()
