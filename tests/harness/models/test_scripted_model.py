"""The scripted model's wire format and bookkeeping, seen by a plain HTTP client (no Codex here).

What Codex accepts is checked in test_scripted_model_codex.py; these pin the exact events and the failure paths.
"""

from __future__ import annotations

import gzip
import http.client
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest

from wardian_harness.models.scripted_model import (
    EXHAUSTED_TEXT,
    TITLE_TEXT,
    AgentScript,
    Fail,
    Hold,
    Message,
    ScriptedModel,
    ScriptedModelError,
    ToolCall,
    developer_texts,
    function_call_outputs,
    offered_tools,
    user_texts,
)

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

BODY: dict[str, Any] = {"model": "mock-model", "stream": True, "input": [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "base prompt"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello there"}]}]}


@contextmanager
def connect(model: ScriptedModel) -> Iterator[http.client.HTTPConnection]:
    parts = urlsplit(model.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        yield conn
    finally:
        conn.close()


def start(conn: http.client.HTTPConnection, path: str, body: bytes | None = None,
          headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    conn.request("POST", path, body=json.dumps(BODY).encode() if body is None else body,
                 headers={"Content-Type": "application/json", "Authorization": "Bearer secret", **(headers or {})})
    return conn.getresponse()


def events(response: http.client.HTTPResponse) -> list[dict[str, Any]]:
    """Parse an SSE body; check each `event:` name equals its payload's `type`."""
    out: list[dict[str, Any]] = []
    for block in response.read().decode().split("\n\n"):
        if not block:
            continue
        name_line, data_line = block.split("\n")
        payload = json.loads(data_line.removeprefix("data: "))
        assert name_line == f"event: {payload['type']}"
        out.append(payload)
    return out


def post(model: ScriptedModel, agent: AgentScript, **kw: Any) -> tuple[int, list[dict[str, Any]]]:
    with connect(model) as conn:
        response = start(conn, urlsplit(agent.base_url).path + "/responses", **kw)
        if response.status != 200:
            response.read()
            return response.status, []
        assert response.getheader("Content-Type") == "text/event-stream"
        return response.status, events(response)


def test_a_message_is_streamed_in_the_full_event_form() -> None:
    """The event sequence of docs/providers/codex.md, with `phase` on the item when given."""
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("hi", phase="final_answer"))
        status, stream = post(model, alice)
    item = {"type": "message", "role": "assistant", "id": "msg_scripted_1_0", "phase": "final_answer"}
    assert status == 200
    assert stream == [
        {"type": "response.created", "response": {"id": "resp_scripted_1"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
        {"type": "response.output_text.delta", "item_id": "msg_scripted_1_0", "output_index": 0,
         "content_index": 0, "delta": "hi"},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {**item, "content": [{"type": "output_text", "text": "hi", "annotations": []}]}},
        {"type": "response.completed", "response": {"id": "resp_scripted_1", "usage": {
            "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}},
    ]


def test_a_tool_call_uses_the_namespace_form_with_a_generated_call_id() -> None:
    """docs/providers/codex.md: a flat `mcp__server__tool` name is not run by Codex; the namespace form is."""
    with ScriptedModel() as model:
        alice = model.agent("alice", ToolCall("post_message", {"channel": "general", "text": "hi"}),
                            ToolCall("reply", '{"request_id":"ask_1"}', call_id="mine"))
        _, first = post(model, alice)
        _, second = post(model, alice)
    done = [e["item"] for e in first + second if e["type"] == "response.output_item.done"]
    assert done == [
        {"type": "function_call", "id": "fc_scripted_1_0", "name": "post_message", "namespace": "mcp__wardian",
         "arguments": '{"channel": "general", "text": "hi"}', "call_id": "call_scripted_1_0"},
        {"type": "function_call", "id": "fc_scripted_2_0", "name": "reply", "namespace": "mcp__wardian",
         "arguments": '{"request_id":"ask_1"}', "call_id": "mine"},
    ]


def test_a_failure_step_ends_with_response_failed() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Fail("mock failed"))
        _, stream = post(model, alice)
    assert stream[-1] == {"type": "response.failed", "response": {
        "id": "resp_scripted_1", "error": {"code": "server_error", "message": "mock failed"}}}


def test_a_callable_step_sees_the_request_body() -> None:
    seen: list[list[str]] = []

    def echo(body: dict[str, Any]) -> Message:
        seen.append(user_texts(body))
        return Message(f"you said {user_texts(body)[-1]}")

    with ScriptedModel() as model:
        alice = model.agent("alice", echo)
        _, stream = post(model, alice)
    assert seen == [["hello there"]]
    assert stream[2]["delta"] == "you said hello there"


def test_the_log_keeps_the_body_and_headers_but_not_authorization() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("ok"))
        post(model, alice, headers={"x-codex-turn-metadata": '{"turn_id": "turn-1"}'})
        (request,) = alice.wait_for_requests(1)
    assert request.body == BODY
    assert request.has_authorization
    assert "authorization" not in request.headers
    assert "Bearer secret" not in repr(request)
    assert request.turn_id == "turn-1"
    assert request.user_texts() == ["hello there"]
    assert request.developer_texts() == ["base prompt"]


def test_a_gzip_body_is_read() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("ok"))
        post(model, alice, body=gzip.compress(json.dumps(BODY).encode()), headers={"Content-Encoding": "gzip"})
    assert alice.last_request.body == BODY


def test_an_exhausted_script_answers_the_default_message_and_says_so() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("only one"))
        post(model, alice)
        _, stream = post(model, alice)
    assert stream[2]["delta"] == EXHAUSTED_TEXT
    assert [r.exhausted for r in alice.requests] == [False, True]


def test_agents_have_separate_scripts_and_logs() -> None:
    with ScriptedModel() as model:
        alice, bob = model.agent("alice", Message("a")), model.agent("bob", Message("b"))
        _, from_bob = post(model, bob)
        _, from_alice = post(model, alice)
    assert (from_alice[2]["delta"], from_bob[2]["delta"]) == ("a", "b")
    assert (len(alice.requests), len(bob.requests)) == (1, 1)


def test_the_server_listens_on_loopback_only() -> None:
    with ScriptedModel() as model:
        assert urlsplit(model.url).hostname == "127.0.0.1"


def test_an_unknown_agent_is_a_404_and_fails_the_check() -> None:
    """A misaddressed base URL must not pass silently: it is recorded, and `check()` (run on exit) raises."""
    with ScriptedModel() as model:
        with connect(model) as conn:
            response = start(conn, "/agents/nobody/v1/responses")
            response.read()
        errors = list(model.errors)
        model.errors.clear()
    assert response.status == 404
    assert len(errors) == 1
    model.errors.extend(errors)
    with pytest.raises(ScriptedModelError) as caught:
        model.check()
    assert caught.value.errors == errors


def test_a_step_that_raises_is_a_500_and_is_recorded() -> None:
    def broken(body: dict[str, Any]) -> Message:
        raise KeyError("no such request id")

    with ScriptedModel() as model:
        alice = model.agent("alice", broken)
        status, _ = post(model, alice)
        errors = list(model.errors)
        model.errors.clear()
    assert status == 500
    assert len(errors) == 1
    assert "KeyError" in errors[0]
    assert [r.answered_by for r in alice.requests] == ["error"]


def test_a_hold_ends_when_the_client_disconnects() -> None:
    """Codex drops the stream on turn/steer and turn/interrupt (docs/providers/codex.md); the hold must notice."""
    hold = Hold("partial")
    with ScriptedModel() as model:
        alice = model.agent("alice", hold)
        with connect(model) as conn:
            response = start(conn, urlsplit(alice.base_url).path + "/responses")
            assert response.status == 200
            assert hold.wait_started().index == 0
        assert hold.wait_finished() == "disconnected"


def test_a_released_hold_completes_its_message() -> None:
    hold = Hold("par", text="partial and whole", phase="commentary")
    with ScriptedModel() as model:
        alice = model.agent("alice", hold)
        with connect(model) as conn:
            response = start(conn, urlsplit(alice.base_url).path + "/responses")
            hold.wait_started()
            hold.release()
            stream = events(response)
    assert [e.get("delta") for e in stream if e["type"] == "response.output_text.delta"] == ["par", "tial and whole"]
    assert stream[-2]["item"]["content"][0]["text"] == "partial and whole"
    assert stream[-2]["item"]["phase"] == "commentary"
    assert stream[-1]["type"] == "response.completed"
    assert hold.outcome == "released"


def test_a_hold_that_times_out_fails_the_response() -> None:
    hold = Hold("partial", timeout_s=0.01)
    with ScriptedModel() as model:
        alice = model.agent("alice", hold)
        _, stream = post(model, alice)
    assert stream[-1]["type"] == "response.failed"
    assert hold.outcome == "timed_out"


def test_stopping_the_server_ends_an_active_hold() -> None:
    hold = Hold("partial")
    with ExitStack() as client:
        with ScriptedModel() as model:
            alice = model.agent("alice", hold)
            conn = client.enter_context(connect(model))  # still open after the server stops
            start(conn, urlsplit(alice.base_url).path + "/responses")
            hold.wait_started()
        assert hold.wait_finished() == "shutdown"


def test_wait_for_requests_is_bounded() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice")
        with pytest.raises(TimeoutError):
            alice.wait_for_requests(1, timeout_s=0.01)


def test_body_helpers_read_tool_outputs_and_offered_tools() -> None:
    """Shapes from docs/providers/codex.md: string outputs, list outputs on failure, the namespace tool entry."""
    body = {"input": [
        {"type": "function_call", "name": "post_message", "namespace": "mcp__wardian", "call_id": "c1",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "Wall time: 0.01 seconds\nOutput:\nposted"},
        {"type": "function_call_output", "call_id": "c2", "output": [
            {"type": "input_text", "text": "Wall time: 2.0 seconds\nOutput:"}, {"type": "input_text", "text": "err"}]},
    ], "tools": [
        {"type": "function", "name": "exec_command"},
        {"type": "namespace", "name": "mcp__wardian", "tools": [{"type": "function", "name": "reply"}]},
    ]}
    first, second = function_call_outputs(body)
    assert (first.name, first.namespace, first.text) == ("post_message", "mcp__wardian",
                                                         "Wall time: 0.01 seconds\nOutput:\nposted")
    assert (second.call_id, second.name, second.text) == ("c2", None, "Wall time: 2.0 seconds\nOutput:\nerr")
    assert offered_tools(body) == {"reply": {"type": "function", "name": "reply"}}
    assert offered_tools(body, "mcp__other") == {}
    assert developer_texts(body) == []


def test_a_title_request_is_answered_without_consuming_a_step() -> None:
    """Codex asks for a thread title on a TUI's first message (a helper thread); the script is not for it."""
    title_body = {**BODY, "input": [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Generate a concise, single-line task title of at most 8 words for: hi"}]}]}
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("the real answer"))
        _, titled = post(model, alice, body=json.dumps(title_body).encode())
        _, answered = post(model, alice)
    assert titled[2]["delta"] == TITLE_TEXT
    assert answered[2]["delta"] == "the real answer"
    assert len(alice.title_requests) == 1
    assert [r.user_texts() for r in alice.requests] == [["hello there"]]
