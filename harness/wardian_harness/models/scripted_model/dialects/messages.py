"""The Anthropic Messages dialect (Claude Code): `POST .../v1/messages` answered by a Server-Sent Events stream of
named events (`message_start`, then per content block `content_block_start`, `text_delta` or `input_json_delta`
deltas and `content_block_stop`, then `message_delta` with the stop reason and `message_stop`), in the form the
real Claude Code accepts (tests/providers/claude/test_dialect_claude.py).

What Claude Code does that a strict reader must allow for:
- the path carries `?beta=true`; the body's `messages` also holds `role: "system"` entries (the environment, the
  list of deferred tools, and messages folded into a running turn);
- its MCP tools are *deferred*: absent from `tools` until the model loads them through the `ToolSearch` tool
  (`{"query": "select:mcp__wardian__list_agents"}`). A scripted call of a deferred tool is therefore preceded by that
  `ToolSearch` call, as a real model does, without consuming the step (`before`);
- side requests that are not the conversation: `count_tokens`, and a non-streaming one-token model check. They are
  answered without consuming a step (`side`).

A scripted `Fail` is an `error` event in the stream, `HttpError` an HTTP error in the API's error shape; a `phase`
has no counterpart and is dropped. A ToolCall's `namespace` `mcp__<server>` names the MCP tool
`mcp__<server>__<name>`; `namespace=None` names a built-in tool (`Bash`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wardian_harness.models.scripted_model.dialects.base import (
    Dialect,
    SseStream,
    Wire,
    arguments_text,
    begin,
    run_hold,
)
from wardian_harness.models.scripted_model.reading import FunctionCallOutput, content_texts
from wardian_harness.models.scripted_model.steps import (
    DEFAULT_USAGE,
    Disconnect,
    Fail,
    Hold,
    HttpError,
    JsonDict,
    Message,
    Response,
    Step,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:
    from wardian_harness.models.scripted_model.requests import RecordedRequest

TOOL_SEARCH = "ToolSearch"
SIDE_TEXT = "ok"
"""The text of a side request's answer (the model check)."""
_USAGE: JsonDict = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0}


def tool_name(call: ToolCall) -> str:
    """The name Claude Code knows a scripted call by: `mcp__<server>__<tool>`, or the built-in's own name."""
    return f"{call.namespace}__{call.name}" if call.namespace else call.name


class _MessageStream(SseStream):
    """One Messages stream: named events, each block opened, filled and closed, then the message's end."""

    def __init__(self, wire: Wire, response_id: str) -> None:
        super().__init__(wire, response_id)
        self.blocks = 0
        self.usage = DEFAULT_USAGE

    def event(self, payload: JsonDict) -> None:
        self.data(f"event: {payload['type']}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n")

    def start(self, model: str, usage: Usage = DEFAULT_USAGE) -> None:
        """The message's start; its usage counts input as the API does: `input_tokens` without the cached ones."""
        self.usage = usage
        self.event({"type": "message_start", "message": {
            "id": self.response_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {
                "input_tokens": usage.input - usage.cached, "output_tokens": 1, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": usage.cached}}})

    def open_text(self) -> int:
        index = self.blocks
        self.blocks += 1
        self.event({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        return index

    def text(self, index: int, text: str) -> None:
        self.event({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}})

    def close_block(self, index: int) -> None:
        self.event({"type": "content_block_stop", "index": index})

    def tool_use(self, call_id: str, name: str, arguments: str) -> None:
        index = self.blocks
        self.blocks += 1
        self.event({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call_id, "name": name, "input": {}}})
        self.event({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": arguments}})
        self.close_block(index)

    def finish(self, stop_reason: str) -> None:
        self.event({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": self.usage.output}})
        self.event({"type": "message_stop"})

    def error(self, kind: str, message: str) -> None:
        self.event({"type": "error", "error": {"type": kind, "message": message}})


class MessagesDialect(Dialect):
    path = ("v1", "messages")
    side_paths = (("v1", "messages", "count_tokens"),)

    def owns(self, body: Mapping[str, Any]) -> bool:
        """A Messages body: `messages` beside a top-level `system`, Anthropic tool shapes or content blocks (a Chat
        Completions body keeps its system prompt inside `messages` and its tools under `function`)."""
        if "messages" not in body:
            return False
        if "system" in body or "thinking" in body or "anthropic_version" in body:
            return True
        if any(isinstance(t, dict) and "input_schema" in t for t in body.get("tools") or []):
            return True
        return any(isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
                   for message in body.get("messages") or [] if isinstance(message, dict)
                   for block in _blocks(message))

    def side(self, wire: Wire, path: Sequence[str], body: Mapping[str, Any]) -> bool:
        """`count_tokens` and non-streaming requests (the CLI's model check): answered as JSON, no step taken."""
        if tuple(path) == self.side_paths[0]:
            _send_json(wire, {"input_tokens": 10 + len(json.dumps(body.get("messages") or [])) // 4})
            return True
        if body.get("stream") is True:
            return False
        _send_json(wire, {"id": f"msg_scripted_{wire.next_id()}", "type": "message", "role": "assistant",
                          "model": str(body.get("model") or "scripted"), "content": [{"type": "text",
                                                                                     "text": SIDE_TEXT}],
                          "stop_reason": "end_turn", "stop_sequence": None, "usage": _USAGE})
        return True

    def before(self, step: Step, body: Mapping[str, Any]) -> Step | None:
        """A `ToolSearch` call loading the deferred tools `step` calls, when they are not offered yet and
        `ToolSearch` is (the step then answers the request after its result)."""
        calls = [step] if isinstance(step, ToolCall) else (
            [i for i in step.items if isinstance(i, ToolCall)] if isinstance(step, Response) else [])
        offered = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}
        missing = [tool_name(c) for c in calls if c.namespace and tool_name(c) not in offered]
        if not missing or TOOL_SEARCH not in offered:
            return None
        return ToolCall(TOOL_SEARCH, {"query": "select:" + ",".join(dict.fromkeys(missing)),
                                      "max_results": len(missing)}, namespace=None)

    def answer(self, wire: Wire, step: Step, recorded: RecordedRequest) -> None:
        if isinstance(step, HttpError):
            _send_error(wire, step.status, step.message)
            return
        n = begin(wire, step)
        stream = _MessageStream(wire, f"msg_scripted_{n}")
        if isinstance(step, Message | ToolCall):
            step = Response([step])
        stream.start(str(recorded.body.get("model") or "scripted"), step.usage if isinstance(step, Response)
                     else DEFAULT_USAGE)
        if isinstance(step, Response):
            _emit_items(stream, n, step)
        elif isinstance(step, Fail):
            stream.error("api_error", step.message)
        elif isinstance(step, Disconnect):
            if step.partial_text is not None:
                stream.text(stream.open_text(), step.partial_text)
            wire.close_connection = True
        elif isinstance(step, Hold):
            _hold(wire, stream, step, recorded)
        else:
            raise TypeError(f"not a step: {step!r}")
        stream.end()

    def tool_outputs(self, body: Mapping[str, Any]) -> list[FunctionCallOutput]:
        """The `tool_result` blocks of the user messages, named after the `tool_use` they answer (an MCP tool
        `mcp__<server>__<tool>` as namespace `mcp__<server>` and name `<tool>`)."""
        names: dict[str, str] = {}
        outputs: list[FunctionCallOutput] = []
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    names[block["id"]] = str(block.get("name", ""))
                elif block.get("type") == "tool_result":
                    raw = block.get("content")
                    text = raw if isinstance(raw, str) else "\n".join(content_texts({"content": raw}))
                    call_id = block.get("tool_use_id")
                    full = names.get(call_id or "", "")
                    namespace, tool = _split(full)
                    outputs.append(FunctionCallOutput(call_id=call_id, text=text, raw=raw, name=tool,
                                                      namespace=namespace))
        return outputs

    def offered_tools(self, body: Mapping[str, Any], namespace: str) -> dict[str, JsonDict]:
        """The tools named `<namespace>__<tool>` in `tools` (a deferred MCP tool appears once ToolSearch loaded it)."""
        prefix = namespace + "__"
        return {str(t["name"])[len(prefix):]: t for t in body.get("tools") or []
                if isinstance(t, dict) and str(t.get("name", "")).startswith(prefix)}


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _split(full: str) -> tuple[str | None, str]:
    if full.startswith("mcp__") and "__" in full[5:]:
        server, _, tool = full[5:].partition("__")
        return f"mcp__{server}", tool
    return None, full


def _emit_items(stream: _MessageStream, n: int, step: Response) -> None:
    calls = 0
    for index, item in enumerate(step.items):
        if isinstance(item, Message):
            block = stream.open_text()
            if item.text:
                stream.text(block, item.text)
            stream.close_block(block)
        elif isinstance(item, ToolCall):
            stream.tool_use(item.call_id or f"toolu_scripted_{n}_{index}", tool_name(item),
                            arguments_text(item.arguments))
            calls += 1
        else:
            raise TypeError(f"not an output item: {item!r}")
    stream.finish("tool_use" if calls else "end_turn")


def _hold(wire: Wire, stream: _MessageStream, hold: Hold, recorded: RecordedRequest) -> None:
    block = stream.open_text()
    stream.text(block, hold.delta)

    def released() -> None:
        rest = hold.text[len(hold.delta):] if hold.text.startswith(hold.delta) else hold.text
        if rest:
            stream.text(block, rest)
        stream.close_block(block)
        stream.finish("end_turn")

    run_hold(wire, stream, hold, recorded, released=released,
             timed_out=lambda: stream.error("api_error", f"scripted hold timed out after {hold.timeout_s}s"))


def _send_json(wire: Wire, payload: JsonDict) -> None:
    wire.send_json(200, payload)


def _send_error(wire: Wire, status: int, message: str) -> None:
    kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    wire.send_json(status, {"type": "error", "error": {"type": kind, "message": message}})
