"""What Qwen Code asks of a Chat Completions model beyond the conversation (docs/guide/acp.md; observed with Qwen
Code 0.24.4):

- side requests, which consume no script step: its auto-mode safety classifier (non-streaming, `stream: false`,
  one tool `respond_in_schema`), answered "do not block"; any other non-streaming request, answered with an empty
  message; the memory-extraction subagent after a turn and the next-input suggestion, answered with a short text;
- its deferred MCP tools: the model sees only the bridge tools `tool_search` and `tool_call`, so a scripted call of
  MCP tool `mcp__<server>__<tool>` first searches for it (`before`), then is sent as
  `tool_call {"name": "mcp__<server>__<tool>", "arguments": {...}}`, and its result is read back under the MCP
  tool's own name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from wardian_harness.models.scripted_model.reading import content_texts
from wardian_harness.models.scripted_model.steps import JsonDict, Response, Step, ToolCall

TOOL_SEARCH = "tool_search"
TOOL_CALL = "tool_call"
CLASSIFIER_TOOL = "respond_in_schema"
SIDE_MARKERS = ("managed memory extraction subagent", "[SUGGESTION MODE")
SIDE_TEXT = "ok"


def offered(body: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            names.add(str(function.get("name", "")))
    return names


def full_name(call: ToolCall) -> str:
    return f"{call.namespace}__{call.name}" if call.namespace else call.name


def bridged(call: ToolCall, names: set[str]) -> bool:
    """Whether the call goes through Qwen Code's `tool_call` bridge (its MCP tool is deferred, the bridge offered)."""
    server = (call.namespace or "").removeprefix("mcp__")
    return bool(call.namespace) and f"{server}_{call.name}" not in names and TOOL_CALL in names


def through_bridge(call: ToolCall) -> ToolCall:
    arguments = json.loads(call.arguments) if isinstance(call.arguments, str) else dict(call.arguments)
    return ToolCall(TOOL_CALL, {"name": full_name(call), "arguments": arguments}, namespace=None,
                    call_id=call.call_id)


def side_answer(body: Mapping[str, Any]) -> JsonDict | None:
    """The non-streaming answer of a side request, or None when `body` is no side request of Qwen Code's."""
    if body.get("stream") is not False:
        return None
    names = offered(body)
    message: JsonDict = {"role": "assistant", "content": ""}
    if CLASSIFIER_TOOL in names:
        message["tool_calls"] = [{"id": "call_scripted_classifier", "type": "function", "function": {
            "name": CLASSIFIER_TOOL, "arguments": json.dumps({"shouldBlock": False})}}]
    return {"id": "chatcmpl-scripted-side", "object": "chat.completion", "model": str(body.get("model") or "m"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}


def is_streamed_side(body: Mapping[str, Any]) -> bool:
    """Qwen Code's memory extraction and next-input suggestion: conversation-shaped, but not the agent's turn."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    texts = [t for m in messages[:1] + messages[-1:] for t in content_texts(m)]
    return any(marker in text for text in texts for marker in SIDE_MARKERS)


def search_first(step: Step, body: Mapping[str, Any]) -> Step | None:
    """A `tool_search` for the bridged MCP tools `step` calls that no earlier search in the request found."""
    calls = [step] if isinstance(step, ToolCall) else (
        [i for i in step.items if isinstance(i, ToolCall)] if isinstance(step, Response) else [])
    names = offered(body)
    if TOOL_SEARCH not in names:
        return None
    found = "\n".join(str(m.get("content")) for m in body.get("messages") or []
                      if isinstance(m, dict) and m.get("role") == "tool")
    missing = [c.name for c in calls if bridged(c, names) and full_name(c) not in found]
    if not missing:
        return None
    return ToolCall(TOOL_SEARCH, {"query": " ".join(dict.fromkeys(missing))}, namespace=None)


def bridged_name(function: str, arguments: str) -> tuple[str, str | None]:
    """The tool a `tool_call` bridge call ran, as (tool, namespace); any other function as itself."""
    if function != TOOL_CALL:
        return function, None
    try:
        name = str(json.loads(arguments).get("name", ""))
    except (ValueError, AttributeError):
        return function, None
    if name.startswith("mcp__") and "__" in name[5:]:
        server, _, tool = name[5:].partition("__")
        return tool, f"mcp__{server}"
    return name, None
