"""The scripted model's Messages dialect (Claude Code) seen by a plain HTTP client: the exact event stream, tool
calls and their results, deferred tools loaded through ToolSearch first, and the side requests that take no step.
What the real Claude Code accepts is checked in tests/providers/claude/test_dialect_claude.py."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlsplit

import pytest

from wardian_harness.models.scripted_model import (
    AgentScript,
    Fail,
    Hold,
    HttpError,
    Message,
    Response,
    ScriptedModel,
    ToolCall,
    function_call_outputs,
    offered_tools,
    user_texts,
)
from wardian_harness.models.scripted_model.dialects import dialect_of
from wardian_harness.models.scripted_model.dialects.messages import MessagesDialect

pytestmark = pytest.mark.fast

SEARCH = {"name": "ToolSearch", "input_schema": {"type": "object"}}
BODY: dict[str, Any] = {
    "model": "claude-opus-5-5", "max_tokens": 128000, "stream": True,
    "system": [{"type": "text", "text": "You are Claude Code"}],
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}, SEARCH],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]},
                 {"role": "system", "content": [{"type": "text", "text": "deferred: mcp__wardian__list_agents"}]}]}


def post(model: ScriptedModel, agent: AgentScript, body: dict[str, Any] | None = None,
         suffix: str = "/messages?beta=true") -> tuple[int, str, bytes]:
    parts = urlsplit(model.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("POST", urlsplit(agent.base_url).path + suffix, body=json.dumps(body or BODY).encode(),
                     headers={"Content-Type": "application/json", "x-api-key": "sk-secret"})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        conn.close()


def events(raw: bytes) -> list[dict[str, Any]]:
    """Parse the SSE body; each `event:` name equals its payload's `type`."""
    out: list[dict[str, Any]] = []
    for block in raw.decode().split("\n\n"):
        if block:
            name_line, data_line = block.split("\n")
            payload = json.loads(data_line.removeprefix("data: "))
            assert name_line == f"event: {payload['type']}"
            out.append(payload)
    return out


def test_a_message_is_streamed_as_one_text_block_ending_the_turn() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("hi ☃\nthere"))
        status, kind, raw = post(model, alice)
    assert (status, kind) == (200, "text/event-stream")
    stream = events(raw)
    assert [e["type"] for e in stream] == ["message_start", "content_block_start", "content_block_delta",
                                           "content_block_stop", "message_delta", "message_stop"]
    assert stream[0]["message"]["model"] == "claude-opus-5-5"
    assert stream[1]["content_block"] == {"type": "text", "text": ""}
    assert stream[2]["delta"] == {"type": "text_delta", "text": "hi ☃\nthere"}
    assert stream[4]["delta"]["stop_reason"] == "end_turn"


def test_a_tool_call_of_an_offered_tool_is_a_tool_use_block() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Response([Message("running it"), ToolCall("Bash", {"command": "echo hi"},
                                                                                namespace=None, call_id="toolu_1")]))
        _, _, raw = post(model, alice)
    stream = events(raw)
    starts = [e["content_block"] for e in stream if e["type"] == "content_block_start"]
    assert starts == [{"type": "text", "text": ""},
                      {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]
    deltas = [e["delta"] for e in stream if e["type"] == "content_block_delta"]
    assert deltas[1] == {"type": "input_json_delta", "partial_json": '{"command": "echo hi"}'}
    assert stream[-2]["delta"]["stop_reason"] == "tool_use"


def test_a_deferred_mcp_tool_is_loaded_through_toolsearch_first_without_consuming_the_step() -> None:
    """Claude Code offers MCP tools only once ToolSearch loaded them: the scripted call waits for that."""
    with ScriptedModel() as model:
        alice = model.agent("alice", ToolCall("list_agents", {}), Message("done"))
        _, _, first = post(model, alice)
        loaded = {**BODY, "tools": [*BODY["tools"], {"name": "mcp__wardian__list_agents", "defer_loading": True,
                                                     "input_schema": {"type": "object"}}]}
        _, _, second = post(model, alice, loaded)
        _, _, third = post(model, alice, loaded)
    uses = [[e["content_block"] for e in events(raw) if e["type"] == "content_block_start"]
            for raw in (first, second)]
    assert uses[0][0]["name"] == "ToolSearch"
    search = [e["delta"]["partial_json"] for e in events(first) if e["type"] == "content_block_delta"]
    assert json.loads(search[0]) == {"query": "select:mcp__wardian__list_agents", "max_results": 1}
    assert uses[1][0]["name"] == "mcp__wardian__list_agents"
    assert events(third)[2]["delta"]["text"] == "done"
    assert [r.answered_by.split("(")[0] for r in alice.requests] == ["ToolCall", "ToolCall", "Message"]
    assert alice.pending == 0


def test_without_toolsearch_a_tool_is_called_directly() -> None:
    body = {**BODY, "tools": [{"name": "Bash", "input_schema": {}}]}
    with ScriptedModel() as model:
        alice = model.agent("alice", ToolCall("list_agents", {}))
        _, _, raw = post(model, alice, body)
    assert [e["content_block"]["name"] for e in events(raw) if e["type"] == "content_block_start"] == [
        "mcp__wardian__list_agents"]


def test_tool_results_and_offered_tools_are_read_from_the_blocks() -> None:
    body = {**BODY, "tools": [SEARCH, {"name": "mcp__wardian__send_message", "input_schema": {}}],
            "messages": [
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "mcp__wardian__list_agents",
                                                   "input": {}},
                                                  {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": '{"result":"[]"}'},
                    {"type": "tool_result", "tool_use_id": "t2", "is_error": True,
                     "content": [{"type": "text", "text": "denied"}]}]}]}
    outputs = function_call_outputs(body)
    assert [(o.namespace, o.name, o.text) for o in outputs] == [
        ("mcp__wardian", "list_agents", '{"result":"[]"}'), (None, "Bash", "denied")]
    assert list(offered_tools(body)) == ["send_message"]
    assert user_texts(body) == ["task"]
    assert isinstance(dialect_of(body), MessagesDialect)


def test_a_chat_completions_body_is_not_taken_for_a_messages_body() -> None:
    chat = {"model": "m", "max_tokens": 10, "messages": [{"role": "system", "content": "s"},
                                                         {"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "wardian_list_agents"}}]}
    assert not isinstance(dialect_of(chat), MessagesDialect)


def test_count_tokens_and_the_non_streaming_model_check_take_no_step() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("real"))
        status, _, counted = post(model, alice, suffix="/messages/count_tokens?beta=true")
        _, kind, checked = post(model, alice, {"model": "claude-sonnet-5-5", "max_tokens": 1,
                                               "messages": [{"role": "user", "content": "Hi"}]})
        _, _, raw = post(model, alice)
    assert status == 200
    assert json.loads(counted)["input_tokens"] > 0
    assert kind == "application/json"
    assert json.loads(checked)["content"] == [{"type": "text", "text": "ok"}]
    assert events(raw)[2]["delta"]["text"] == "real"
    assert len(alice.requests) == 1
    assert [r.answered_by for r in alice.title_requests] == ["side", "side"]


def test_failures_are_an_error_event_or_an_api_error_body() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Fail("boom"), HttpError(401, "invalid x-api-key"))
        _, _, failed = post(model, alice)
        status, _, refused = post(model, alice)
    assert events(failed)[-1] == {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    assert status == 401
    assert json.loads(refused) == {"type": "error", "error": {"type": "authentication_error",
                                                              "message": "invalid x-api-key"}}


def test_a_released_hold_completes_its_text_block() -> None:
    with ScriptedModel() as model:
        hold = Hold("work", text="work done")
        alice = model.agent("alice", hold)
        thread = threading.Thread(target=lambda: (hold.wait_started(10), hold.release()))
        thread.start()
        _, _, raw = post(model, alice)
        thread.join(10)
    texts = [e["delta"]["text"] for e in events(raw) if e["type"] == "content_block_delta"]
    assert texts == ["work", " done"]
    assert events(raw)[-2]["delta"]["stop_reason"] == "end_turn"
    assert hold.outcome == "released"
