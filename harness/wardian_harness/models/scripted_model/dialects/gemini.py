"""The Gemini REST dialect (Gemini CLI, through the google-genai SDK, with `GOOGLE_GEMINI_BASE_URL` pointed at the
agent's URL): `POST .../v1beta/models/<model>:streamGenerateContent?alt=sse` answered by `data:` chunks of
`candidates`, the last with a `finishReason`; no end marker. Other methods of the same path (`:generateContent`,
`:countTokens`) are side requests, answered without a script step.

The dialect has no failure event and no message phase: a scripted `Fail` is an HTTP 400, a phase is dropped, and a
released `Hold` can only add to what was streamed. MCP tools are Gemini CLI's `mcp_<server>_<tool>` functions
(declared directly, not deferred); a tool result comes back as a `functionResponse` part.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wardian_harness.models.scripted_model.dialects.base import Dialect, SseStream, Wire, begin, run_hold
from wardian_harness.models.scripted_model.reading import FunctionCallOutput
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

STREAM = ":streamGenerateContent"


def _candidate(parts: list[JsonDict], finish: str | None = None, usage: Usage = DEFAULT_USAGE) -> JsonDict:
    candidate: JsonDict = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    metadata = {"promptTokenCount": usage.input, "candidatesTokenCount": usage.output,
                "totalTokenCount": usage.input + usage.output, "cachedContentTokenCount": usage.cached}
    return {"candidates": [candidate], "usageMetadata": metadata, "modelVersion": "scripted"}


class _CandidateStream(SseStream):
    def chunk(self, parts: list[JsonDict], finish: str | None = None, usage: Usage = DEFAULT_USAGE) -> None:
        self.data(f"data: {json.dumps(_candidate(parts, finish, usage), ensure_ascii=False)}\n\n")


def function_name(call: ToolCall) -> str:
    server = (call.namespace or "").removeprefix("mcp__")
    return f"mcp_{server}_{call.name}" if server else call.name


def _split(name: str) -> tuple[str, str | None]:
    """(tool, namespace) of a Gemini CLI function name (`mcp_wardian_list_agents` -> list_agents, mcp__wardian)."""
    if name.startswith("mcp_") and "_" in name[4:]:
        server, _, tool = name[4:].partition("_")
        return tool, f"mcp__{server}"
    return name, None


class GeminiDialect(Dialect):
    path = ("v1beta", "models")

    def serves(self, path: Sequence[str]) -> bool:
        return len(path) == 3 and tuple(path[:2]) == self.path

    def owns(self, body: Mapping[str, Any]) -> bool:
        return "contents" in body

    def side(self, wire: Wire, path: Sequence[str], body: Mapping[str, Any]) -> bool:
        """Every method but `streamGenerateContent` (the router's `generateContent`, `countTokens`)."""
        if path[-1].endswith(STREAM):
            return False
        if path[-1].endswith(":countTokens"):
            wire.send_json(200, {"totalTokens": 10})
        else:
            wire.send_json(200, _candidate([{"text": "{}"}], "STOP"))
        return True

    def answer(self, wire: Wire, step: Step, recorded: RecordedRequest) -> None:
        if isinstance(step, HttpError):
            wire.send_json_error(step.status, step.message)
            return
        if isinstance(step, Fail):
            wire.send_json_error(400, step.message)
            return
        begin(wire, step)
        stream = _CandidateStream(wire, "gemini-scripted")
        if isinstance(step, Message | ToolCall):
            step = Response([step])
        if isinstance(step, Response):
            parts: list[JsonDict] = []
            for item in step.items:
                if isinstance(item, Message):
                    parts.append({"text": item.text})
                else:
                    arguments = json.loads(item.arguments) if isinstance(item.arguments, str) else dict(item.arguments)
                    parts.append({"functionCall": {"name": function_name(item), "args": arguments}})
            stream.chunk(parts, "STOP", step.usage)
        elif isinstance(step, Disconnect):
            if step.partial_text is not None:
                stream.chunk([{"text": step.partial_text}])
            wire.close_connection = True
        elif isinstance(step, Hold):
            _hold(wire, stream, step, recorded)
        else:
            raise TypeError(f"not a step: {step!r}")
        stream.end()

    def tool_outputs(self, body: Mapping[str, Any]) -> list[FunctionCallOutput]:
        outputs: list[FunctionCallOutput] = []
        for content in body.get("contents") or []:
            for part in (content.get("parts") or []) if isinstance(content, dict) else []:
                response = part.get("functionResponse") if isinstance(part, dict) else None
                if not isinstance(response, dict):
                    continue
                raw = response.get("response")
                output = raw.get("output", raw) if isinstance(raw, dict) else raw
                text = output if isinstance(output, str) else json.dumps(output)
                tool, namespace = _split(str(response.get("name", "")))
                outputs.append(FunctionCallOutput(call_id=response.get("id"), text=text, raw=raw, name=tool,
                                                  namespace=namespace))
        return outputs

    def offered_tools(self, body: Mapping[str, Any], namespace: str) -> dict[str, JsonDict]:
        prefix = f"mcp_{namespace.removeprefix('mcp__')}_"
        found: dict[str, JsonDict] = {}
        for tool in body.get("tools") or []:
            for function in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
                name = str(function.get("name", "")) if isinstance(function, dict) else ""
                if name.startswith(prefix):
                    found[name[len(prefix):]] = function
        return found


def _hold(wire: Wire, stream: _CandidateStream, hold: Hold, recorded: RecordedRequest) -> None:
    stream.chunk([{"text": hold.delta}])

    def released() -> None:
        rest = hold.text[len(hold.delta):] if hold.text.startswith(hold.delta) else hold.text
        stream.chunk([{"text": rest}] if rest else [], "STOP")

    run_hold(wire, stream, hold, recorded, released=released,
             timed_out=lambda: stream.chunk([{"text": ""}], "OTHER"))
