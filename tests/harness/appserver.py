"""A tiny JSON-RPC-over-stdio driver for `codex app-server`, for the harness tests only.

Not the product's client (that lives in core): one reader thread puts every line on a queue; the test thread
routes responses by id and keeps notifications in arrival order. Every wait has a timeout, and `close()` kills the
child's whole process group and reaps it (the child runs in its own session).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

JsonDict = dict[str, Any]
_EOF = object()


class RpcError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, error: JsonDict) -> None:
        super().__init__(f"{method}: {error}")
        self.method = method
        self.code = error.get("code")
        self.error = error


@dataclass
class AppServer:
    proc: subprocess.Popen[bytes]
    timeout_s: float = 30.0
    notifications: list[JsonDict] = field(default_factory=list)
    _lines: queue.Queue[object] = field(default_factory=queue.Queue)
    _responses: dict[int, JsonDict] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _seen: int = 0  # notifications before this index were already matched by `wait_for`

    def __post_init__(self) -> None:
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True, name="appserver-reader").start()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            self._lines.put(line)
        self._lines.put(_EOF)

    def _pump(self, deadline: float) -> None:
        """Take one line off the queue (waiting until `deadline` on the monotonic clock) and file it."""
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(f"no awaited message from codex app-server within {self.timeout_s}s") from None
        if line is _EOF:
            self._lines.put(_EOF)
            raise EOFError(f"codex app-server closed stdout (exit code {self.proc.poll()})")
        assert isinstance(line, bytes)
        message = json.loads(line)
        if "id" in message and "method" not in message:
            self._responses[message["id"]] = message
        elif "id" in message:
            # A server request (approval, elicitation); these tests never expect one.
            raise AssertionError(f"unexpected server request: {message}")
        else:
            self.notifications.append(message)

    def send(self, message: Mapping[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> JsonDict:
        """Send a request and return its result.

        Raises:
            RpcError: the server answered with an error.
            TimeoutError: no answer within `timeout_s`.
        """
        request_id = next(self._ids)
        deadline = time.monotonic() + self.timeout_s
        self.send({"id": request_id, "method": method, "params": dict(params or {})})
        while request_id not in self._responses:
            self._pump(deadline)
        response = self._responses.pop(request_id)
        if "error" in response:
            raise RpcError(method, response["error"])
        return response["result"]

    def wait_for(self, method: str, where: Callable[[JsonDict], bool] = lambda _: True) -> JsonDict:
        """Return the params of the next not-yet-matched notification `method` satisfying `where`.

        Raises:
            TimeoutError: none arrived within `timeout_s`.
        """
        deadline = time.monotonic() + self.timeout_s
        while True:
            for index in range(self._seen, len(self.notifications)):
                note = self.notifications[index]
                if note["method"] == method and where(note.get("params", {})):
                    self._seen = index + 1
                    return note.get("params", {})
            self._pump(deadline)

    def items_completed(self, turn_id: str) -> list[JsonDict]:
        """The `item/completed` items of a turn received so far, in order."""
        return [n["params"]["item"] for n in self.notifications
                if n["method"] == "item/completed" and n["params"].get("turnId") == turn_id]

    # ---- the v2 flow used by the tests

    def initialize(self) -> JsonDict:
        result = self.request("initialize", {
            "clientInfo": {"name": "wardian-harness-test", "title": "Wardian harness test", "version": "0.0.1"},
            "capabilities": {"experimentalApi": True}})
        self.send({"method": "initialized"})
        return result

    def start_thread(self, cwd: Path) -> str:
        return self.request("thread/start", {"cwd": str(cwd)})["thread"]["id"]

    def start_turn(self, thread_id: str, text: str) -> str:
        result = self.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": text}]})
        return result["turn"]["id"]

    def wait_turn_completed(self, turn_id: str) -> JsonDict:
        return self.wait_for("turn/completed", lambda p: p["turn"]["id"] == turn_id)["turn"]

    # ---- lifetime

    def close(self) -> None:
        """Close stdin, then kill the whole process group and reap it; assert nothing of it is left."""
        proc = self.proc
        try:
            descendants = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            descendants = []
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own session (start_new_session=True)
        proc.wait(timeout=10)
        _, alive = psutil.wait_procs(descendants, timeout=10)
        for straggler in alive:  # left the group (setsid): still ours to end
            with contextlib.suppress(psutil.NoSuchProcess):
                straggler.kill()
        psutil.wait_procs(alive, timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
        assert not alive, f"processes outlived codex app-server: {alive}"


@contextlib.contextmanager
def app_server(codex: Path, env: Mapping[str, str], cwd: Path, args: Sequence[str] = (),
               stderr: Path | None = None) -> Iterator[AppServer]:
    """Spawn `codex app-server [args]` over stdio in its own session; always kill and reap it on exit."""
    err = stderr.open("wb") if stderr is not None else subprocess.DEVNULL
    try:
        proc = subprocess.Popen([str(codex), "app-server", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, env=dict(env), cwd=cwd, start_new_session=True)
    finally:
        if stderr is not None:
            err.close()  # type: ignore[union-attr]
    server = AppServer(proc)
    try:
        yield server
    finally:
        server.close()
