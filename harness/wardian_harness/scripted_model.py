"""A scripted model on loopback, so the real Codex and OpenCode CLIs run fully offline in tests.

`ScriptedModel` is an HTTP server on 127.0.0.1 (ephemeral port, background threads) that answers, in two wire
dialects from the same scripts:
- `POST /agents/<name>/v1/responses` (Codex): a Responses API Server-Sent Events stream in the form Codex accepts
  (docs/providers/codex.md, checked against the real binary in `tests/harness/`);
- `POST /agents/<name>/v1/chat/completions` (OpenCode, through its bundled `@ai-sdk/openai-compatible`): a Chat
  Completions stream of `data:` chunks ended by `data: [DONE]` (docs/providers/opencode.md).
Each agent has its own base URL (the same for both dialects) and its own script, so one server serves several
private provider homes. A script is a queue of steps; every model request consumes one step:

- `Message(text, phase=None)`: one assistant message; `phase` is "commentary" or "final_answer" and reaches
  the agentMessage item unchanged.
- `Response(items)`: several output items (messages and tool calls) in one response, e.g. commentary then final.
- `ToolCall(name, arguments, namespace="mcp__wardian")`: a function call in the namespace form Codex needs to
  run an MCP tool (a flat `mcp__server__tool` name is answered with "unsupported call"); `call_id` is generated.
  In the chat dialect the same step calls OpenCode's `<server>_<tool>` function (`wardian_send_message`).
- `Fail(message)`: `response.failed`, so the turn fails with "stream disconnected before completion: <message>".
- `Disconnect(partial_text=None)`: the stream ends before `response.completed` (optionally after a partial message).
- `HttpError(status=500)`: a plain HTTP error with a JSON body instead of a stream.
- `Hold(delta)`: streams a partial message delta, then blocks until the test calls `release()` (the message is
  then completed), the client goes away (Codex drops the stream on `turn/steer` and `turn/interrupt`), the
  server stops, or `timeout_s` passes (then `response.failed`). A `Hold` is single-use.
- a callable `(request_body: dict) -> Step`, called with the parsed request, so a script can react to what Codex
  sent (for example, read the previous `function_call_output` and act on it).

In the chat dialect a `Message`'s phase is dropped (OpenCode has none), `Fail` is an HTTP 400 (a stream cannot fail
in this dialect), `Disconnect` ends the stream without a finish reason, and a released `Hold`'s message is its delta
followed by the rest of its `text` (chunks can only add to what was streamed).

When a script runs out, the request is answered with `Message(EXHAUSTED_TEXT)` and recorded as exhausted instead
of hanging. Every request is recorded per agent (`RecordedRequest`: JSON body, headers without Authorization,
receive time, which step answered it); helpers read user/developer texts, offered tools and tool outputs.

Invariants:
- The server binds 127.0.0.1 only and never makes outbound connections.
- The Authorization header is never stored; only whether one was present.
- A client that disconnects mid-stream ends that response quietly; it is not an error.
- A step that raises, an unknown agent, a bad path or an unreadable body is answered with an HTTP error and
  appended to `ScriptedModel.errors`; leaving the `with` block raises `ScriptedModelError` if any were recorded
  (unless another exception is already propagating), so a broken script cannot pass silently.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import select
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, TypeAlias, cast
from urllib.parse import quote, unquote

__all__ = [
    "CHAT_TITLE_PROMPT",
    "EXHAUSTED_TEXT",
    "TITLE_PROMPT",
    "TITLE_TEXT",
    "AgentScript",
    "Disconnect",
    "Fail",
    "FunctionCallOutput",
    "Hold",
    "HoldOutcome",
    "HttpError",
    "Message",
    "RecordedRequest",
    "Response",
    "ScriptedModel",
    "ScriptedModelError",
    "Step",
    "ToolCall",
    "developer_texts",
    "function_call_outputs",
    "offered_tools",
    "user_texts",
]

JsonDict: TypeAlias = dict[str, Any]
Phase: TypeAlias = Literal["commentary", "final_answer"]
HoldOutcome: TypeAlias = Literal["released", "disconnected", "timed_out", "shutdown"]

EXHAUSTED_TEXT = "script exhausted"
TITLE_PROMPT = "Generate a concise, single-line task title"
"""Codex asks for a thread title (a helper thread) on a TUI's first message; such requests consume no step."""
TITLE_TEXT = "Scripted task"
"""The assistant text sent when an agent's script has no step left for a request."""
CHAT_TITLE_PROMPT = "You are a title generator"
"""OpenCode's title helper (its system prompt) for a session created without a title; consumes no step."""

_LOOPBACK = "127.0.0.1"
_MAX_BODY_BYTES = 64 * 1024 * 1024  # Codex replays the whole history each request; far above any real test.


class ScriptedModelError(AssertionError):
    """A script or the server misbehaved (a step raised, an unknown agent was addressed, a body was unreadable)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("the scripted model recorded errors:\n" + "\n---\n".join(errors))
        self.errors = errors


# --------------------------------------------------------------------------------------------------- steps


@dataclass(frozen=True, slots=True)
class Message:
    """One assistant message; `phase` passes through to Codex's agentMessage item."""

    text: str
    phase: Phase | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call in namespace form: Codex runs MCP tool `name` of server `namespace[len("mcp__"):]`."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    namespace: str | None = "mcp__wardian"
    call_id: str | None = None  # generated (unique per server) when None


@dataclass(frozen=True, slots=True)
class Response:
    """Several output items in one response, streamed in order."""

    items: Sequence[Message | ToolCall]


@dataclass(frozen=True, slots=True)
class Fail:
    """A `response.failed` event instead of `response.completed`."""

    message: str = "scripted failure"
    code: str = "server_error"


@dataclass(frozen=True, slots=True)
class Disconnect:
    """End the stream before `response.completed`, optionally after a partial assistant message delta."""

    partial_text: str | None = None


@dataclass(frozen=True, slots=True)
class HttpError:
    """Answer with a non-streaming HTTP error (Codex maps 500 to `internalServerError`)."""

    status: int = 500
    message: str = "scripted http error"


class Hold:
    """Stream `delta` as the start of a message, then block until released, disconnected, stopped or timed out.

    After `release()` the message is completed with `text` (default: `delta`) and the response completes
    normally. The handler thread watches the connection while it waits, so a client that cancels the stream
    ends the hold at once with outcome "disconnected".
    """

    def __init__(self, delta: str = "working", *, text: str | None = None, phase: Phase | None = None,
                 timeout_s: float = 60.0) -> None:
        self.delta = delta
        self.text = delta if text is None else text
        self.phase: Phase | None = phase
        self.timeout_s = timeout_s
        self.request: RecordedRequest | None = None
        self.outcome: HoldOutcome | None = None
        self._started = threading.Event()
        self._finished = threading.Event()
        self._lock = threading.Lock()
        self._claimed = False
        self._stop: HoldOutcome | None = None
        # A socketpair wakes the handler's select() on release or shutdown, next to the client socket.
        self._wake_r, self._wake_w = socket.socketpair()

    def __repr__(self) -> str:
        return f"Hold(delta={self.delta!r})"

    @property
    def started(self) -> bool:
        """Whether a request has reached this hold and its delta was sent."""
        return self._started.is_set()

    def wait_started(self, timeout_s: float = 30.0) -> RecordedRequest:
        """Block until a request is being held and return it.

        Raises:
            TimeoutError: no request reached the hold within `timeout_s`.
        """
        if not self._started.wait(timeout_s):
            raise TimeoutError(f"no model request reached {self!r} within {timeout_s}s")
        assert self.request is not None
        return self.request

    def release(self) -> None:
        """Let the held response complete (no effect once the hold has ended)."""
        self._signal("released")

    def wait_finished(self, timeout_s: float = 30.0) -> HoldOutcome:
        """Block until the held response has ended and return how it ended.

        Raises:
            TimeoutError: the hold did not end within `timeout_s`.
        """
        if not self._finished.wait(timeout_s):
            raise TimeoutError(f"{self!r} did not end within {timeout_s}s")
        assert self.outcome is not None
        return self.outcome

    def _signal(self, outcome: HoldOutcome) -> None:
        with self._lock:
            if self._stop is None:
                self._stop = outcome
        with contextlib.suppress(OSError):  # already closed: the hold has ended
            self._wake_w.send(b"x")

    def _claim(self) -> None:
        with self._lock:
            if self._claimed:
                raise RuntimeError(f"{self!r} was used by a second request; a Hold is single-use")
            self._claimed = True

    def _wait(self, conn: socket.socket) -> HoldOutcome:
        deadline = time.monotonic() + self.timeout_s
        watch: list[socket.socket] = [conn, self._wake_r]
        while True:
            with self._lock:
                if self._stop is not None:
                    return self._stop
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timed_out"
            readable, _, _ = select.select(watch, [], [], remaining)
            if self._wake_r in readable:
                self._wake_r.recv(64)
                continue  # a release or shutdown wins over a disconnect seen in the same wake-up
            if conn in readable:
                try:
                    peeked = conn.recv(1, socket.MSG_PEEK)
                except OSError:
                    return "disconnected"
                if not peeked:
                    return "disconnected"
                watch = [self._wake_r]  # the client pipelined bytes; stop watching rather than spin

    def _finish(self, outcome: HoldOutcome) -> None:
        self.outcome = outcome
        self._wake_r.close()
        self._wake_w.close()
        self._finished.set()


Step: TypeAlias = "Message | Response | ToolCall | Fail | Disconnect | HttpError | Hold | Callable[[JsonDict], Step]"
"""One scripted answer to one model request (see the module docstring)."""


# ------------------------------------------------------------------------------------------ request log


def _content_texts(item: Mapping[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]


def _role_texts(body: Mapping[str, Any], role: str) -> list[str]:
    texts: list[str] = []
    for item in body.get("input") or body.get("messages") or []:
        if isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") == role:
            texts.extend(_content_texts(item))
    return texts


def user_texts(body: Mapping[str, Any]) -> list[str]:
    """Every `input_text` of every user message in a request's `input`, in order (replayed history included)."""
    return _role_texts(body, "user")


def developer_texts(body: Mapping[str, Any]) -> list[str]:
    """Every text of every developer message in a request's `input`, in order."""
    return _role_texts(body, "developer")


@dataclass(frozen=True, slots=True)
class FunctionCallOutput:
    """A tool result Codex sent back to the model; `text` joins the parts of a list-form (failed) output."""

    call_id: str | None
    text: str
    raw: Any
    name: str | None = None
    namespace: str | None = None


def _chat_tool_outputs(body: Mapping[str, Any]) -> list[FunctionCallOutput]:
    """The chat dialect's `role: tool` messages, named after the assistant `tool_calls` they answer."""
    names: dict[str, str] = {}
    outputs: list[FunctionCallOutput] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                names[call["id"]] = str((call.get("function") or {}).get("name", ""))
        if message.get("role") == "tool":
            raw = message.get("content")
            text = raw if isinstance(raw, str) else "\n".join(_content_texts({"content": raw}))
            call_id = message.get("tool_call_id")
            full = names.get(call_id or "", "")
            server, _, tool = full.partition("_")
            outputs.append(FunctionCallOutput(call_id=call_id, text=text, raw=raw, name=tool or full,
                                              namespace=f"mcp__{server}" if tool else None))
    return outputs


def function_call_outputs(body: Mapping[str, Any]) -> list[FunctionCallOutput]:
    """Every tool result in a request, in order, named after its matching call: the Responses dialect's
    `function_call_output` items, or the chat dialect's `role: tool` messages (namespace `mcp__<server>` for an
    OpenCode `<server>_<tool>` function)."""
    if "messages" in body:
        return _chat_tool_outputs(body)
    calls: dict[str, JsonDict] = {}
    outputs: list[FunctionCallOutput] = []
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call" and isinstance(item.get("call_id"), str):
            calls[item["call_id"]] = item
        elif item.get("type") == "function_call_output":
            raw = item.get("output")
            text = raw if isinstance(raw, str) else "\n".join(_content_texts({"content": raw}))
            call = calls.get(item.get("call_id") or "", {})
            outputs.append(FunctionCallOutput(call_id=item.get("call_id"), text=text, raw=raw,
                                              name=call.get("name", item.get("name")),
                                              namespace=call.get("namespace", item.get("namespace"))))
    return outputs


def _is_title_request(body: Mapping[str, Any]) -> bool:
    instructions = body.get("instructions")
    texts = [*user_texts(body), *developer_texts(body), instructions if isinstance(instructions, str) else "",
             *_role_texts(body, "system")]
    return any(TITLE_PROMPT in t or CHAT_TITLE_PROMPT in t for t in texts)


def offered_tools(body: Mapping[str, Any], namespace: str = "mcp__wardian") -> dict[str, JsonDict]:
    """The function tools offered inside `namespace` (e.g. "mcp__wardian"), by tool name; {} when absent. In the
    chat dialect, OpenCode's `wardian_<tool>` functions (the server name before the first underscore)."""
    if "messages" in body:
        prefix = namespace.removeprefix("mcp__") + "_"
        found: dict[str, JsonDict] = {}
        for tool in body.get("tools") or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and str(function.get("name", "")).startswith(prefix):
                found[str(function["name"])[len(prefix):]] = function
        return found
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "namespace" and tool.get("name") == namespace:
            return {t["name"]: t for t in tool.get("tools") or [] if isinstance(t, dict) and "name" in t}
    return {}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One model request as the server received it (Authorization removed)."""

    agent: str
    index: int  # 0-based position in this agent's log
    path: str
    headers: Mapping[str, str]  # lower-cased names, without authorization
    has_authorization: bool
    body: JsonDict
    received_at_ms: int  # Unix ms
    answered_by: str  # repr of the step that answered, or "exhausted"

    @property
    def exhausted(self) -> bool:
        """Whether the script had run out, so the default message answered."""
        return self.answered_by == "exhausted"

    @property
    def turn_metadata(self) -> JsonDict:
        """The parsed `x-codex-turn-metadata` header ({} when absent or unreadable)."""
        try:
            value = json.loads(self.headers.get("x-codex-turn-metadata", ""))
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def turn_id(self) -> str | None:
        """The Codex turn this request samples for, from `x-codex-turn-metadata`."""
        value = self.turn_metadata.get("turn_id")
        return value if isinstance(value, str) else None

    def user_texts(self) -> list[str]:
        """See `user_texts`."""
        return user_texts(self.body)

    def developer_texts(self) -> list[str]:
        """See `developer_texts`."""
        return developer_texts(self.body)

    def function_call_outputs(self) -> list[FunctionCallOutput]:
        """See `function_call_outputs`."""
        return function_call_outputs(self.body)

    def offered_tools(self, namespace: str = "mcp__wardian") -> dict[str, JsonDict]:
        """See `offered_tools`."""
        return offered_tools(self.body, namespace)


# ------------------------------------------------------------------------------------------------ agents


class AgentScript:
    """One agent's script queue and request log; get one from `ScriptedModel.agent`."""

    def __init__(self, model: ScriptedModel, name: str) -> None:
        self.name = name
        self._model = model
        self._steps: deque[Step] = deque()
        self._log: list[RecordedRequest] = []
        self._titles: list[RecordedRequest] = []
        self._cond = threading.Condition()

    def __repr__(self) -> str:
        return f"AgentScript({self.name!r}, pending={len(self._steps)}, requests={len(self._log)})"

    @property
    def base_url(self) -> str:
        """The provider `base_url` for this agent; Codex POSTs to `{base_url}/responses`."""
        return f"{self._model.url}/agents/{quote(self.name, safe='')}/v1"

    def add(self, *steps: Step) -> AgentScript:
        """Append steps to the script (consumed one per model request) and return self."""
        with self._cond:
            self._steps.extend(steps)
        return self

    @property
    def pending(self) -> int:
        """How many steps are still queued."""
        with self._cond:
            return len(self._steps)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the request log, oldest first."""
        with self._cond:
            return list(self._log)

    @property
    def last_request(self) -> RecordedRequest:
        """The newest request.

        Raises:
            LookupError: no request has arrived yet.
        """
        with self._cond:
            if not self._log:
                raise LookupError(f"agent {self.name!r} has received no model request")
            return self._log[-1]

    @property
    def exhausted_requests(self) -> list[RecordedRequest]:
        """Requests answered by the default message because the script had run out."""
        return [r for r in self.requests if r.exhausted]

    def wait_for_requests(self, count: int, timeout_s: float = 30.0) -> list[RecordedRequest]:
        """Block until at least `count` requests have been recorded and return the log.

        Raises:
            TimeoutError: fewer than `count` requests arrived within `timeout_s`.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._log) >= count, timeout_s):
                raise TimeoutError(f"agent {self.name!r}: {len(self._log)} of {count} requests after {timeout_s}s")
            return list(self._log)

    def _next_step(self) -> Step | None:
        with self._cond:
            return self._steps.popleft() if self._steps else None

    @property
    def title_requests(self) -> list[RecordedRequest]:
        """Codex's title-generation requests, answered with TITLE_TEXT; not in `requests`, no step consumed."""
        with self._cond:
            return list(self._titles)

    def _record_title(self, make: Callable[[int], RecordedRequest]) -> RecordedRequest:
        with self._cond:
            recorded = make(len(self._titles))
            self._titles.append(recorded)
            return recorded

    def _record(self, make: Callable[[int], RecordedRequest]) -> RecordedRequest:
        with self._cond:
            recorded = make(len(self._log))
            self._log.append(recorded)
            self._cond.notify_all()
            return recorded


# ------------------------------------------------------------------------------------------------ server


class _Stream:
    """Writes one SSE response with chunked transfer encoding; tolerates a client that has gone away."""

    def __init__(self, handler: _Handler, response_id: str) -> None:
        self._handler = handler
        self.response_id = response_id
        self.closed = False

    def event(self, payload: JsonDict) -> None:
        if self.closed:
            return
        data = f"event: {payload['type']}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()
        self._write(b"%x\r\n%s\r\n" % (len(data), data))

    def end(self) -> None:
        self._write(b"0\r\n\r\n")

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self._handler.wfile.write(data)
            self._handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.closed = True
            self._handler.close_connection = True


class _ChatStream(_Stream):
    """One Chat Completions stream: `data:` chunks without event names, ended by `data: [DONE]`."""

    def chunk(self, payload: JsonDict) -> None:
        if self.closed:
            return
        data = f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()
        self._write(b"%x\r\n%s\r\n" % (len(data), data))

    def delta(self, delta: JsonDict) -> None:
        self.chunk({"id": self.response_id, "object": "chat.completion.chunk", "model": "scripted",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})

    def finish(self, reason: str) -> None:
        self.chunk({"id": self.response_id, "object": "chat.completion.chunk", "model": "scripted",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
        self._write(b"e\r\ndata: [DONE]\n\n\r\n")

    def error(self, message: str) -> None:
        self.chunk({"error": {"message": message, "type": "scripted_model"}})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked SSE, as the real API sends

    @property
    def _model(self) -> ScriptedModel:
        return cast(_Server, self.server).model  # the only server class this handler is used with

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
        self._fail_request(404, f"only POST .../v1/responses and .../v1/chat/completions are served, not GET "
                           f"{self.path}")

    def do_POST(self) -> None:
        model = self._model
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        chat = parts[2:] == ["v1", "chat", "completions"]
        if len(parts) < 4 or parts[0] != "agents" or not (chat or parts[2:] == ["v1", "responses"]):
            self._fail_request(404, f"unknown path {self.path!r}; expected /agents/<name>/v1/responses or "
                               "/agents/<name>/v1/chat/completions")
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
        if _is_title_request(body):
            # Codex's title helper, not the agent's conversation: answer it without consuming a script step.
            recorded = agent._record_title(lambda i: self._recorded(agent, i, body, "title"))
            (self._answer_chat if chat else self._answer)(Message(TITLE_TEXT), recorded)
            return
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
            agent._record(lambda i: self._recorded(agent, i, body, "error"))
            self._fail_request(500, f"agent {name!r}: step raised:\n{traceback.format_exc()}")
            return
        recorded = agent._record(lambda i: self._recorded(agent, i, body, "exhausted" if exhausted else repr(step)))
        try:
            (self._answer_chat if chat else self._answer)(step, recorded)
        except Exception:
            self.close_connection = True
            model._error(f"agent {name!r}: answering with {step!r} raised:\n{traceback.format_exc()}")

    def _recorded(self, agent: AgentScript, index: int, body: JsonDict, answered_by: str) -> RecordedRequest:
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
        return RecordedRequest(agent=agent.name, index=index, path=self.path, headers=headers,
                               has_authorization="authorization" in {k.lower() for k in self.headers},
                               body=body, received_at_ms=time.time_ns() // 1_000_000, answered_by=answered_by)

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

    def _fail_request(self, status: int, message: str) -> None:
        self._model._error(message)
        self._send_json_error(status, message)

    def _send_json_error(self, status: int, message: str) -> None:
        data = json.dumps({"error": {"message": message, "type": "scripted_model"}}).encode()
        self.close_connection = True
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass

    def _answer(self, step: Step, recorded: RecordedRequest) -> None:
        model = self._model
        if isinstance(step, HttpError):
            self._send_json_error(step.status, step.message)
            return
        if isinstance(step, Hold):
            step._claim()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        n = model._next_id()
        stream = _Stream(self, f"resp_scripted_{n}")
        stream.event({"type": "response.created", "response": {"id": stream.response_id}})
        if isinstance(step, Message | ToolCall):
            step = Response([step])
        if isinstance(step, Response):
            for index, item in enumerate(step.items):
                self._emit_item(stream, n, index, item)
            self._complete(stream)
        elif isinstance(step, Fail):
            stream.event({"type": "response.failed", "response": {
                "id": stream.response_id, "error": {"code": step.code, "message": step.message}}})
        elif isinstance(step, Disconnect):
            if step.partial_text is not None:
                item_id = f"msg_scripted_{n}_0"
                stream.event(_message_added(0, item_id, None))
                stream.event(_text_delta(0, item_id, step.partial_text))
            self.close_connection = True
        elif isinstance(step, Hold):
            self._hold(stream, n, step, recorded)
        else:
            raise TypeError(f"not a step: {step!r}")
        stream.end()

    def _hold(self, stream: _Stream, n: int, hold: Hold, recorded: RecordedRequest) -> None:
        item_id = f"msg_scripted_{n}_0"
        stream.event(_message_added(0, item_id, hold.phase))
        stream.event(_text_delta(0, item_id, hold.delta))
        hold.request = recorded
        self._model._holding(hold, add=True)
        hold._started.set()
        outcome: HoldOutcome = "disconnected"
        try:
            outcome = "disconnected" if stream.closed else hold._wait(self.connection)
            if outcome == "released":
                rest = hold.text[len(hold.delta):] if hold.text.startswith(hold.delta) else ""
                if rest:
                    stream.event(_text_delta(0, item_id, rest))
                stream.event(_message_done(0, item_id, hold.text, hold.phase))
                self._complete(stream)
            elif outcome == "timed_out":
                stream.event({"type": "response.failed", "response": {"id": stream.response_id, "error": {
                    "code": "server_error", "message": f"scripted hold timed out after {hold.timeout_s}s"}}})
            else:
                self.close_connection = True
        finally:
            self._model._holding(hold, add=False)
            hold._finish(outcome)

    def _emit_item(self, stream: _Stream, n: int, index: int, item: Message | ToolCall) -> None:
        if isinstance(item, Message):
            item_id = f"msg_scripted_{n}_{index}"
            stream.event(_message_added(index, item_id, item.phase))
            if item.text:
                stream.event(_text_delta(index, item_id, item.text))
            stream.event(_message_done(index, item_id, item.text, item.phase))
        elif isinstance(item, ToolCall):
            arguments = item.arguments if isinstance(item.arguments, str) else json.dumps(dict(item.arguments))
            call: JsonDict = {"type": "function_call", "id": f"fc_scripted_{n}_{index}", "name": item.name,
                              "arguments": arguments, "call_id": item.call_id or f"call_scripted_{n}_{index}"}
            if item.namespace is not None:
                call["namespace"] = item.namespace
            stream.event({"type": "response.output_item.added", "output_index": index, "item": call})
            stream.event({"type": "response.output_item.done", "output_index": index, "item": call})
        else:
            raise TypeError(f"not an output item: {item!r}")

    # --- the chat dialect (OpenCode) -------------------------------------------------------------------

    def _answer_chat(self, step: Step, recorded: RecordedRequest) -> None:
        if isinstance(step, HttpError):
            self._send_json_error(step.status, step.message)
            return
        if isinstance(step, Fail):
            # A Chat Completions stream has no failure event: the scripted failure is a request error.
            self._send_json_error(400, step.message)
            return
        if isinstance(step, Hold):
            step._claim()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        n = self._model._next_id()
        stream = _ChatStream(self, f"chatcmpl-scripted-{n}")
        if isinstance(step, Message | ToolCall):
            step = Response([step])
        if isinstance(step, Response):
            calls = 0
            for item in step.items:
                if isinstance(item, Message):
                    if item.text:
                        stream.delta({"role": "assistant", "content": item.text})
                elif isinstance(item, ToolCall):
                    arguments = item.arguments if isinstance(item.arguments, str) else json.dumps(dict(item.arguments))
                    server = (item.namespace or "").removeprefix("mcp__")
                    stream.delta({"tool_calls": [{
                        "index": calls, "id": item.call_id or f"call_scripted_{n}_{calls}", "type": "function",
                        "function": {"name": f"{server}_{item.name}" if server else item.name,
                                     "arguments": arguments}}]})
                    calls += 1
                else:
                    raise TypeError(f"not an output item: {item!r}")
            stream.finish("tool_calls" if calls else "stop")
        elif isinstance(step, Disconnect):
            if step.partial_text is not None:
                stream.delta({"role": "assistant", "content": step.partial_text})
            self.close_connection = True
            stream.end()
            return
        elif isinstance(step, Hold):
            self._hold_chat(stream, step, recorded)
        else:
            raise TypeError(f"not a step: {step!r}")
        stream.end()

    def _hold_chat(self, stream: _ChatStream, hold: Hold, recorded: RecordedRequest) -> None:
        stream.delta({"role": "assistant", "content": hold.delta})
        hold.request = recorded
        self._model._holding(hold, add=True)
        hold._started.set()
        outcome: HoldOutcome = "disconnected"
        try:
            outcome = "disconnected" if stream.closed else hold._wait(self.connection)
            if outcome == "released":
                # Chunks only add to what was streamed: the rest of `text` after the delta, or `text` itself.
                rest = hold.text[len(hold.delta):] if hold.text.startswith(hold.delta) else hold.text
                if rest:
                    stream.delta({"content": rest})
                stream.finish("stop")
            elif outcome == "timed_out":
                stream.error(f"scripted hold timed out after {hold.timeout_s}s")
            else:
                self.close_connection = True
        finally:
            self._model._holding(hold, add=False)
            hold._finish(outcome)

    @staticmethod
    def _complete(stream: _Stream) -> None:
        stream.event({"type": "response.completed", "response": {"id": stream.response_id, "usage": {
            "input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
            "output_tokens_details": None, "total_tokens": 15}}})


def _message_item(item_id: str, phase: Phase | None, content: list[JsonDict]) -> JsonDict:
    item: JsonDict = {"type": "message", "role": "assistant", "id": item_id, "content": content}
    if phase is not None:
        item["phase"] = phase
    return item


def _message_added(index: int, item_id: str, phase: Phase | None) -> JsonDict:
    return {"type": "response.output_item.added", "output_index": index, "item": _message_item(item_id, phase, [])}


def _text_delta(index: int, item_id: str, delta: str) -> JsonDict:
    return {"type": "response.output_text.delta", "item_id": item_id, "output_index": index,
            "content_index": 0, "delta": delta}


def _message_done(index: int, item_id: str, text: str, phase: Phase | None) -> JsonDict:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "response.output_item.done", "output_index": index,
            "item": _message_item(item_id, phase, content)}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        super().__init__((_LOOPBACK, 0), _Handler)


class ScriptedModel:
    """A loopback Responses API server with one script per agent; use it as a context manager.

    Example:
        with ScriptedModel() as model:
            alice = model.agent("alice", Message("hi", phase="final_answer"))
            write_codex_config(codex_home, ScriptedProvider(alice.base_url))
    """

    def __init__(self) -> None:
        self.agents: dict[str, AgentScript] = {}
        self.errors: list[str] = []
        self._server: _Server | None = None
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
        self._server = _Server(self)
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

