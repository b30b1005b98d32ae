"""The scripted model's HTTP side: route a request to its agent and dialect, record it, answer with the next step.

The handler is the `Wire` the dialects answer on; it knows them only through `dialects.Dialect`.
"""

from __future__ import annotations

import gzip
import json
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote

from wardian_harness.models.scripted_model.agents import AgentScript
from wardian_harness.models.scripted_model.dialects import DIALECTS, Dialect, dialect_at
from wardian_harness.models.scripted_model.requests import (
    KEY_HEADERS,
    UNAUTHORIZED,
    RecordedRequest,
    carried_keys,
    is_title_request,
    key_fingerprint,
)
from wardian_harness.models.scripted_model.steps import (
    EXHAUSTED_TEXT,
    TITLE_TEXT,
    Hold,
    HttpError,
    JsonDict,
    Message,
    Step,
)

if TYPE_CHECKING:
    from wardian_harness.models.scripted_model.model import ScriptedModel

LOOPBACK = "127.0.0.1"
_MAX_BODY_BYTES = 64 * 1024 * 1024  # Codex replays the whole history each request; far above any real test.
_SERVED = " or ".join(f"/agents/<name>/{'/'.join(d.path)}" for d in sorted(DIALECTS, key=lambda d: len(d.path)))


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        super().__init__((LOOPBACK, 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked SSE, as the real API sends
    # Each SSE chunk is its own small write: with Nagle's algorithm on, one waits for the client's delayed ACK (40 ms
    # on Linux) whenever the one before is unacknowledged, which made a one-message answer take 6 or 46 ms by chance.
    disable_nagle_algorithm = True

    @property
    def _model(self) -> ScriptedModel:
        return cast(Server, self.server).model  # the only server class this handler is used with

    def setup(self) -> None:
        super().setup()
        self._model._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._model._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the record; stderr noise would only hide test output

    def do_GET(self) -> None:
        if self.headers.get("upgrade", "").lower() == "websocket":
            # Codex's built-in OpenAI provider tries a WebSocket first and falls back to POST on 426, as it does
            # against any server that speaks no WebSocket.
            self._send_and_close(426, "text/plain", b"the scripted model serves POST only; no WebSocket")
            return
        self._fail_request(404, f"only POST {_SERVED} is served, not GET {self.path}")

    def do_HEAD(self) -> None:
        # Claude Code's reachability check of its base URL (sent only when its non-essential traffic is allowed).
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        model = self._model
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        dialect = dialect_at(parts[2:])
        if len(parts) < 4 or parts[0] != "agents" or dialect is None:
            self._fail_request(404, f"unknown path {self.path!r}; expected {_SERVED}")
            return
        name = unquote(parts[1])
        agent = model.agents.get(name)
        if agent is None:
            self._fail_request(404, f"unknown agent {name!r}; known: {sorted(model.agents)}")
            return
        try:
            body = self._read_body()
        except ValueError as exc:
            self._fail_request(400, f"agent {name!r}: unreadable request body: {exc}")
            return
        key, allowed = self._key(agent)
        if not allowed:
            # Checked before anything else, whatever the dialect: its own error form carries the 401.
            recorded = agent._record(lambda i: self._recorded(agent, i, body, UNAUTHORIZED, key))
            what = "no key" if key is None else "a different key"
            dialect.answer(self, HttpError(401, f"scripted model: agent {name!r} requires its own API key; the "
                                                f"request carried {what}"), recorded)
            return
        if dialect.side(self, parts[2:], body):
            # Not the agent's conversation (Claude Code's token counts and model check): no step consumed.
            agent._record_title(lambda i: self._recorded(agent, i, body, "side", key))
            return
        if is_title_request(body):
            # Codex's title helper, not the agent's conversation: answer it without consuming a script step.
            recorded = agent._record_title(lambda i: self._recorded(agent, i, body, "title", key))
            dialect.answer(self, Message(TITLE_TEXT), recorded)
            return
        self._answer_next(dialect, agent, body, key)

    def _key(self, agent: AgentScript) -> tuple[str | None, bool]:
        """The fingerprint of the key the request carried (the required one, when it is among them), and whether the
        request may be answered: always, unless the agent requires a key the request did not carry."""
        carried = [key_fingerprint(k) for k in carried_keys({k.lower(): v for k, v in self.headers.items()})]
        required = agent.required_key
        if required is not None and required in carried:
            return required, True
        return (carried[0] if carried else None), required is None

    def _answer_next(self, dialect: Dialect, agent: AgentScript, body: JsonDict, key: str | None) -> None:
        """Resolve the agent's next step (the default message once the script ran out) and answer with it."""
        name = agent.name
        step = agent._next_step()
        exhausted = step is None
        if step is None:
            step = Message(EXHAUSTED_TEXT)
        try:
            while callable(step):
                step = step(body)
            if step is None:
                raise TypeError("a callable step returned None")
        except Exception:
            agent._record(lambda i: self._recorded(agent, i, body, "error", key))
            self._fail_request(500, f"agent {name!r}: step raised:\n{traceback.format_exc()}")
            return
        resolved: Step = step
        first = None if exhausted else dialect.before(resolved, body)
        if first is not None:
            # What a real model answers first (Claude Code: load a deferred tool); the step answers the next request.
            agent._put_back(resolved)
            resolved = first
        recorded = agent._record(lambda i: self._recorded(agent, i, body,
                                                          "exhausted" if exhausted else repr(resolved), key))
        try:
            dialect.answer(self, resolved, recorded)
        except Exception:
            self.close_connection = True
            self._model._error(f"agent {name!r}: answering with {resolved!r} raised:\n{traceback.format_exc()}")

    def _recorded(self, agent: AgentScript, index: int, body: JsonDict, answered_by: str,
                  key: str | None) -> RecordedRequest:
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in KEY_HEADERS}
        now = time.time_ns()
        return RecordedRequest(agent=agent.name, index=index, path=self.path, headers=headers,
                               has_authorization="authorization" in {k.lower() for k in self.headers},
                               body=body, received_at_ms=now // 1_000_000, answered_by=answered_by,
                               key=key, received_at_ns=now)

    def _read_body(self) -> JsonDict:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            raw = bytearray()
            while True:
                size = int(self.rfile.readline(64).split(b";", 1)[0], 16)
                if size == 0:
                    self.rfile.readline(64)
                    break
                raw += self.rfile.read(size)
                self.rfile.readline(64)
                if len(raw) > _MAX_BODY_BYTES:
                    raise ValueError("body too large")
            data = bytes(raw)
        else:
            length = int(self.headers.get("content-length", "0"))
            if length > _MAX_BODY_BYTES:
                raise ValueError("body too large")
            data = self.rfile.read(length)
        encoding = self.headers.get("content-encoding", "identity").lower()
        if encoding == "gzip":
            data = gzip.decompress(data)
        elif encoding != "identity":
            raise ValueError(f"unsupported content-encoding {encoding!r}")
        body = json.loads(data)
        if not isinstance(body, dict):
            raise ValueError("the body is not a JSON object")
        return body

    def _send_and_close(self, status: int, content_type: str, data: bytes) -> None:
        """A whole answer, after which the connection closes (an error leaves nothing worth keeping it for)."""
        self.close_connection = True
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass

    def _fail_request(self, status: int, message: str) -> None:
        self._model._error(message)
        self.send_json_error(status, message)

    # --- the Wire the dialects answer on -----------------------------------------------------------------

    def send_json_error(self, status: int, message: str) -> None:
        data = json.dumps({"error": {"message": message, "type": "scripted_model"}}).encode()
        self._send_and_close(status, "application/json", data)

    def send_json(self, status: int, payload: JsonDict) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_bytes(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
            return False
        return True

    def next_id(self) -> int:
        return self._model._next_id()

    def holding(self, hold: Hold, *, add: bool) -> None:
        self._model._holding(hold, add=add)
