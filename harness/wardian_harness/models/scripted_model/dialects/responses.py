"""The OpenAI Responses dialect (Codex): `POST .../v1/responses` answered by a Server-Sent Events stream of named
events (`response.created`, output items and text deltas, then `response.completed` or `response.failed`), in the
form the real Codex accepts."""

from __future__ import annotations

import json
from collections.abc import Mapping
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
    Phase,
    Response,
    Step,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:
    from wardian_harness.models.scripted_model.requests import RecordedRequest


class _EventStream(SseStream):
    def event(self, payload: JsonDict) -> None:
        self.data(f"event: {payload['type']}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n")

    def complete(self, usage: Usage = DEFAULT_USAGE) -> None:
        self.event({"type": "response.completed", "response": {"id": self.response_id, "usage": {
            "input_tokens": usage.input, "input_tokens_details": {"cached_tokens": usage.cached},
            "output_tokens": usage.output, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input + usage.output}}})

    def failed(self, code: str, message: str) -> None:
        self.event({"type": "response.failed", "response": {
            "id": self.response_id, "error": {"code": code, "message": message}}})


class ResponsesDialect(Dialect):
    path = ("v1", "responses")

    def owns(self, body: Mapping[str, Any]) -> bool:
        return "messages" not in body

    def answer(self, wire: Wire, step: Step, recorded: RecordedRequest) -> None:
        if isinstance(step, HttpError):
            wire.send_json_error(step.status, step.message)
            return
        n = begin(wire, step)
        stream = _EventStream(wire, f"resp_scripted_{n}")
        stream.event({"type": "response.created", "response": {"id": stream.response_id}})
        if isinstance(step, Message | ToolCall):
            step = Response([step])
        if isinstance(step, Response):
            for index, item in enumerate(step.items):
                _emit_item(stream, n, index, item)
            stream.complete(step.usage)
        elif isinstance(step, Fail):
            stream.failed(step.code, step.message)
        elif isinstance(step, Disconnect):
            if step.partial_text is not None:
                item_id = f"msg_scripted_{n}_0"
                stream.event(_message_added(0, item_id, None))
                stream.event(_text_delta(0, item_id, step.partial_text))
            wire.close_connection = True
        elif isinstance(step, Hold):
            _hold(wire, stream, n, step, recorded)
        else:
            raise TypeError(f"not a step: {step!r}")
        stream.end()

    def tool_outputs(self, body: Mapping[str, Any]) -> list[FunctionCallOutput]:
        """The `function_call_output` items of the request's `input`, named after their `function_call`."""
        calls: dict[str, JsonDict] = {}
        outputs: list[FunctionCallOutput] = []
        for item in body.get("input") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call" and isinstance(item.get("call_id"), str):
                calls[item["call_id"]] = item
            elif item.get("type") == "function_call_output":
                raw = item.get("output")
                text = raw if isinstance(raw, str) else "\n".join(content_texts({"content": raw}))
                call = calls.get(item.get("call_id") or "", {})
                outputs.append(FunctionCallOutput(call_id=item.get("call_id"), text=text, raw=raw,
                                                  name=call.get("name", item.get("name")),
                                                  namespace=call.get("namespace", item.get("namespace"))))
        return outputs

    def offered_tools(self, body: Mapping[str, Any], namespace: str) -> dict[str, JsonDict]:
        """The tools of the `namespace` tool of that name."""
        for tool in body.get("tools") or []:
            if isinstance(tool, dict) and tool.get("type") == "namespace" and tool.get("name") == namespace:
                return {t["name"]: t for t in tool.get("tools") or [] if isinstance(t, dict) and "name" in t}
        return {}


def _hold(wire: Wire, stream: _EventStream, n: int, hold: Hold, recorded: RecordedRequest) -> None:
    item_id = f"msg_scripted_{n}_0"
    stream.event(_message_added(0, item_id, hold.phase))
    stream.event(_text_delta(0, item_id, hold.delta))

    def released() -> None:
        rest = hold.text[len(hold.delta):] if hold.text.startswith(hold.delta) else ""
        if rest:
            stream.event(_text_delta(0, item_id, rest))
        stream.event(_message_done(0, item_id, hold.text, hold.phase))
        stream.complete()

    run_hold(wire, stream, hold, recorded, released=released,
             timed_out=lambda: stream.failed("server_error", f"scripted hold timed out after {hold.timeout_s}s"))


def _emit_item(stream: _EventStream, n: int, index: int, item: Message | ToolCall) -> None:
    if isinstance(item, Message):
        item_id = f"msg_scripted_{n}_{index}"
        stream.event(_message_added(index, item_id, item.phase))
        if item.text:
            stream.event(_text_delta(index, item_id, item.text))
        stream.event(_message_done(index, item_id, item.text, item.phase))
    elif isinstance(item, ToolCall):
        call: JsonDict = {"type": "function_call", "id": f"fc_scripted_{n}_{index}", "name": item.name,
                          "arguments": arguments_text(item.arguments),
                          "call_id": item.call_id or f"call_scripted_{n}_{index}"}
        if item.namespace is not None:
            call["namespace"] = item.namespace
        stream.event({"type": "response.output_item.added", "output_index": index, "item": call})
        stream.event({"type": "response.output_item.done", "output_index": index, "item": call})
    else:
        raise TypeError(f"not an output item: {item!r}")


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
