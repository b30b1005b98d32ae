"""The OpenAI Chat Completions dialect (OpenCode, through its bundled `@ai-sdk/openai-compatible`):
`POST .../v1/chat/completions` answered by a stream of `data:` chunks without event names, ended by `data: [DONE]`.

The dialect has no failure event and no message phase: a scripted `Fail` is an HTTP 400, a phase is dropped, and a
released `Hold` can only add to what was streamed. MCP tools are OpenCode's `<server>_<tool>` functions, Pi's
extension tools under their own names, or Qwen Code's deferred tools behind its `tool_search`/`tool_call` bridge, whose
side requests are answered too (`chat_qwen`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wardian_harness.models.scripted_model.dialects import chat_qwen
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


class _ChunkStream(SseStream):
    """One Chat Completions stream: `data:` chunks without event names, ended by `data: [DONE]`."""

    def chunk(self, payload: JsonDict) -> None:
        self.data(f"data: {json.dumps(payload, ensure_ascii=False)}\n\n")

    def delta(self, delta: JsonDict) -> None:
        self.chunk({"id": self.response_id, "object": "chat.completion.chunk", "model": "scripted",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})

    def finish(self, reason: str, usage: Usage = DEFAULT_USAGE) -> None:
        self.chunk({"id": self.response_id, "object": "chat.completion.chunk", "model": "scripted",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
                    "usage": {"prompt_tokens": usage.input, "completion_tokens": usage.output,
                              "total_tokens": usage.input + usage.output,
                              "prompt_tokens_details": {"cached_tokens": usage.cached}}})
        self.write(b"e\r\ndata: [DONE]\n\n\r\n")

    def error(self, message: str) -> None:
        self.chunk({"error": {"message": message, "type": "scripted_model"}})


class ChatDialect(Dialect):
    path = ("v1", "chat", "completions")

    def owns(self, body: Mapping[str, Any]) -> bool:
        return "messages" in body

    def side(self, wire: Wire, path: Sequence[str], body: Mapping[str, Any]) -> bool:
        """Qwen Code's side requests (`chat_qwen`): its non-streaming classifier, memory extraction, suggestions."""
        answer = chat_qwen.side_answer(body)
        if answer is not None:
            wire.send_json(200, answer)
            return True
        if not chat_qwen.is_streamed_side(body):
            return False
        begin(wire, Message(chat_qwen.SIDE_TEXT))
        stream = _ChunkStream(wire, f"chatcmpl-scripted-side-{wire.next_id()}")
        stream.delta({"role": "assistant", "content": chat_qwen.SIDE_TEXT})
        stream.finish("stop")
        stream.end()
        return True

    def before(self, step: Step, body: Mapping[str, Any]) -> Step | None:
        """Qwen Code's `tool_search` for a deferred MCP tool the step calls (`chat_qwen`)."""
        return chat_qwen.search_first(step, body)

    def answer(self, wire: Wire, step: Step, recorded: RecordedRequest) -> None:
        if isinstance(step, HttpError):
            wire.send_json_error(step.status, step.message)
            return
        if isinstance(step, Fail):
            # A Chat Completions stream has no failure event: the scripted failure is a request error.
            wire.send_json_error(400, step.message)
            return
        n = begin(wire, step)
        stream = _ChunkStream(wire, f"chatcmpl-scripted-{n}")
        if isinstance(step, Message | ToolCall):
            step = Response([step])
        if isinstance(step, Response):
            _emit_items(stream, n, step, chat_qwen.offered(recorded.body))
        elif isinstance(step, Disconnect):
            if step.partial_text is not None:
                stream.delta({"role": "assistant", "content": step.partial_text})
            wire.close_connection = True
        elif isinstance(step, Hold):
            _hold(wire, stream, step, recorded)
        else:
            raise TypeError(f"not a step: {step!r}")
        stream.end()

    def tool_outputs(self, body: Mapping[str, Any]) -> list[FunctionCallOutput]:
        """The `role: tool` messages, named after the assistant `tool_calls` they answer (namespace `mcp__<server>`
        for an OpenCode `<server>_<tool>` function)."""
        names: dict[str, tuple[str, str | None]] = {}
        outputs: list[FunctionCallOutput] = []
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    function = call.get("function") or {}
                    names[call["id"]] = chat_qwen.bridged_name(str(function.get("name", "")),
                                                               str(function.get("arguments", "")))
            if message.get("role") == "tool":
                raw = message.get("content")
                text = raw if isinstance(raw, str) else "\n".join(content_texts({"content": raw}))
                call_id = message.get("tool_call_id")
                full, namespace = names.get(call_id or "", ("", None))
                if namespace is None:
                    server, _, tool = full.partition("_")
                    namespace, full = (f"mcp__{server}", tool) if tool else (None, full)
                outputs.append(FunctionCallOutput(call_id=call_id, text=text, raw=raw, name=full,
                                                  namespace=namespace))
        return outputs

    def offered_tools(self, body: Mapping[str, Any], namespace: str) -> dict[str, JsonDict]:
        """OpenCode's `<server>_<tool>` functions (the server name before the first underscore)."""
        prefix = namespace.removeprefix("mcp__") + "_"
        found: dict[str, JsonDict] = {}
        for tool in body.get("tools") or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and str(function.get("name", "")).startswith(prefix):
                found[str(function["name"])[len(prefix):]] = function
        return found


def _emit_items(stream: _ChunkStream, n: int, step: Response, offered: set[str]) -> None:
    calls = 0
    for item in step.items:
        if isinstance(item, ToolCall) and chat_qwen.bridged(item, offered):
            item = chat_qwen.through_bridge(item)
        if isinstance(item, Message):
            if item.text:
                stream.delta({"role": "assistant", "content": item.text})
        elif isinstance(item, ToolCall):
            stream.delta({"tool_calls": [{
                "index": calls, "id": item.call_id or f"call_scripted_{n}_{calls}", "type": "function",
                "function": {"name": _function_name(item, offered), "arguments": arguments_text(item.arguments)}}]})
            calls += 1
        else:
            raise TypeError(f"not an output item: {item!r}")
    stream.finish("tool_calls" if calls else "stop", step.usage)


def _function_name(call: ToolCall, offered: set[str]) -> str:
    """OpenCode's `<server>_<tool>` for an MCP tool; the tool's own name when only that is offered: Pi has no MCP,
    and wardian's extension registers each of its tools under the MCP tool's name (docs/guide/pi.md)."""
    server = (call.namespace or "").removeprefix("mcp__")
    if not server or (f"{server}_{call.name}" not in offered and call.name in offered):
        return call.name
    return f"{server}_{call.name}"


def _hold(wire: Wire, stream: _ChunkStream, hold: Hold, recorded: RecordedRequest) -> None:
    stream.delta({"role": "assistant", "content": hold.delta})

    def released() -> None:
        # Chunks only add to what was streamed: the rest of `text` after the delta, or `text` itself.
        rest = hold.text[len(hold.delta):] if hold.text.startswith(hold.delta) else hold.text
        if rest:
            stream.delta({"content": rest})
        stream.finish("stop")

    run_hold(wire, stream, hold, recorded, released=released,
             timed_out=lambda: stream.error(f"scripted hold timed out after {hold.timeout_s}s"))
