"""`ScriptedModel`: the server's lifecycle, its agents' scripts and the errors it recorded."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from types import TracebackType

from wardian_harness.models.scripted_model.agents import AgentScript
from wardian_harness.models.scripted_model.server import Server
from wardian_harness.models.scripted_model.steps import Hold, ScriptedModelError, Step


class ScriptedModel:
    """A loopback model server (Responses and Chat Completions) with one script per agent; use it as a context manager.

    Example:
        with ScriptedModel() as model:
            alice = model.agent("alice", Message("hi", phase="final_answer"))
            write_codex_config(codex_home, ScriptedProvider(alice.base_url))
    """

    def __init__(self) -> None:
        self.agents: dict[str, AgentScript] = {}
        self.errors: list[str] = []
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._connections: set[socket.socket] = set()
        self._holds: set[Hold] = set()

    def agent(self, name: str, *steps: Step) -> AgentScript:
        """The script of agent `name` (created on first use), with `steps` appended."""
        with self._lock:
            script = self.agents.get(name)
            if script is None:
                script = self.agents[name] = AgentScript(self, name)
        return script.add(*steps)

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` of the running server.

        Raises:
            RuntimeError: the server is not running.
        """
        if self._server is None:
            raise RuntimeError("the scripted model is not running; use it inside `with ScriptedModel() as model:`")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ScriptedModel:
        """Bind 127.0.0.1 on an ephemeral port and serve from a background thread."""
        if self._server is not None:
            raise RuntimeError("the scripted model is already running")
        self._server = Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: end every hold ("shutdown"), close open connections, join the server thread."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            holds, connections = list(self._holds), list(self._connections)
        for hold in holds:
            hold._signal("shutdown")
        for hold in holds:
            hold._finished.wait(10)  # let each held response end before its connection is cut
        for conn in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)
        thread.join(10)
        self._server = self._thread = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if exc_type is None:
            self.check()

    def check(self) -> None:
        """Raise if the server has recorded any error so far (leaving the `with` block calls this).

        Raises:
            ScriptedModelError: with `errors` listing every recorded problem.
        """
        with self._lock:
            errors = list(self.errors)
        if errors:
            raise ScriptedModelError(errors)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _holding(self, hold: Hold, *, add: bool) -> None:
        with self._lock:
            if add:
                self._holds.add(hold)
            else:
                self._holds.discard(hold)

