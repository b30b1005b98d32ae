"""Schema hygiene of the tool list as a host sees it (docs/reliability.md row M8), read through the SDK's client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.mcp.mcp_harness import mcp_server, server_env
from wardian.model import MAX_CURSOR_CHARS, MAX_MESSAGE_BYTES, MAX_RECEIVE_LIMIT, MAX_TARGET_CHARS, MAX_WAIT_MS
from wardian.protocol.tools import TOOLS_BY_NAME

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

FORBIDDEN = {"sender", "from", "session", "session_id", "sender_id", "from_agent"}


@pytest.fixture(scope="module")
def listed() -> Iterator[dict[str, dict[str, Any]]]:
    """The tools/list of a server with no home and no session, as JSON."""
    with mcp_server(server_env()) as conn:
        tools = conn.list_tools().tools
        yield {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in tools}


def _properties(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, prop in schema.get("properties", {}).items():
        yield name, prop
        yield from _properties(prop)


def test_every_input_schema_is_a_closed_object(listed: dict[str, dict[str, Any]]) -> None:
    """M8, TOOL-4: every inputSchema has `additionalProperties: false`."""
    for name, tool in listed.items():
        schema = tool["inputSchema"]
        assert schema["type"] == "object", name
        assert schema["additionalProperties"] is False, name
        assert set(schema["required"]) <= set(schema["properties"]), name


def _types(prop: dict[str, Any]) -> set[str]:
    return set(prop["type"]) if isinstance(prop["type"], list) else {prop["type"]}


def test_every_field_is_bounded(listed: dict[str, dict[str, Any]]) -> None:
    """M8: bounded maxLength / minimum / maximum (or an enum) on every field."""
    for name, tool in listed.items():
        for field, prop in _properties(tool["inputSchema"]):
            if "enum" in prop:
                continue
            types = _types(prop) - {"null"}
            if types == {"boolean"}:
                continue
            if types == {"string"}:
                assert 1 <= prop["minLength"] <= prop["maxLength"], (name, field)
            else:
                assert types == {"integer"}, (name, field)
                assert prop["minimum"] <= prop.get("default", prop["minimum"]) <= prop["maximum"], (name, field)


def test_exactly_the_optional_fields_admit_null(listed: dict[str, dict[str, Any]]) -> None:
    """B15, B16: a null limit, timeout_ms or cursor means its default, so the schema admits it; a required field
    is never null. The P4 property test checks the validators agree (tests/reliability/test_validators.py)."""
    for name, tool in listed.items():
        schema = tool["inputSchema"]
        nullable = {field for field, prop in schema["properties"].items() if "null" in _types(prop)}
        assert nullable == set(schema["properties"]) - set(schema["required"]), name


def test_the_bounds_are_the_limits_of_the_seed(listed: dict[str, dict[str, Any]]) -> None:
    """RCV-4, WAIT-3: limit is bounded to 100 records and timeout_ms to 60 seconds; wait's default and max are 60 s."""
    receive = listed["receive_messages"]["inputSchema"]["properties"]
    assert (receive["limit"]["minimum"], receive["limit"]["maximum"]) == (1, MAX_RECEIVE_LIMIT)
    assert (receive["timeout_ms"]["minimum"], receive["timeout_ms"]["maximum"]) == (0, MAX_WAIT_MS)
    assert receive["cursor"]["maxLength"] == receive["ack_cursor"]["maxLength"] == MAX_CURSOR_CHARS
    wait = listed["wait_agent"]["inputSchema"]["properties"]["timeout_ms"]
    assert (wait["minimum"], wait["maximum"], wait["default"]) == (0, MAX_WAIT_MS, MAX_WAIT_MS)
    for tool in ("send_message", "followup_task", "reply"):
        assert listed[tool]["inputSchema"]["properties"]["message"]["maxLength"] == MAX_MESSAGE_BYTES
    for tool in ("send_message", "followup_task", "interrupt_agent"):
        assert listed[tool]["inputSchema"]["properties"]["target"]["maxLength"] == MAX_TARGET_CHARS


def test_the_required_arguments_are_those_of_the_seed(listed: dict[str, dict[str, Any]]) -> None:
    """TOOL-2: send and follow-up arguments are target and message; reply takes request_id, status and message;
    answer_approval (wardian's) takes approval_id and decision."""
    required = {name: sorted(tool["inputSchema"]["required"]) for name, tool in listed.items()}
    assert required == {
        "wait_agent": [], "send_message": ["message", "target"], "followup_task": ["message", "target"],
        "receive_messages": [], "reply": ["message", "request_id", "status"], "interrupt_agent": ["target"],
        "list_agents": [], "answer_approval": ["approval_id", "decision"],
    }
    assert listed["reply"]["inputSchema"]["properties"]["status"]["enum"] == ["done", "blocked", "failed"]
    assert listed["answer_approval"]["inputSchema"]["properties"]["decision"]["enum"] == ["allow", "deny"]


def test_no_tool_accepts_a_sender_or_a_session(listed: dict[str, dict[str, Any]]) -> None:
    """TOOL-3: no tool accepts an arbitrary sender argument; M8 (no sender property anywhere)."""
    for name, tool in listed.items():
        assert not {field for field, _ in _properties(tool["inputSchema"])} & FORBIDDEN, name


def test_descriptions_are_the_constants_of_the_source(listed: dict[str, dict[str, Any]]) -> None:
    """M8, TOOL-4: descriptions are constants (no peer-controlled text can reach tools/list)."""
    for name, tool in listed.items():
        assert tool["description"] == TOOLS_BY_NAME[name].description
        assert tool["inputSchema"] == TOOLS_BY_NAME[name].input_schema


def test_descriptions_teach_information_versus_work_wait_receive_ack_and_reply_by_request_id(
        listed: dict[str, dict[str, Any]]) -> None:
    """Decision 0007: descriptions written for a model: information vs work, wait then receive then ack, reply with the
    request id, and never resend an uncertain delivery."""
    text = {name: tool["description"] for name, tool in listed.items()}
    assert "followup_task" in text["send_message"]
    assert "information" in text["send_message"].lower()
    assert "send_message" in text["followup_task"]
    assert "request_id" in text["followup_task"]
    assert "receive_messages" in text["wait_agent"]
    assert "without reading" in text["wait_agent"]
    assert "ack_cursor" in text["receive_messages"]
    assert "request_id" in text["reply"]
    for tool in ("send_message", "followup_task"):
        assert "uncertain" in text[tool]
        assert "do not resend" in text[tool]


def test_annotations_are_truthful(listed: dict[str, dict[str, Any]]) -> None:
    """TOOL-4: truthful annotations. Only list_agents and wait_agent change nothing; receive acknowledges and
    claims (not read-only); interrupting abandons a turn (destructive); the rest reach other agents (open world):
    answering an approval lets another agent act."""
    hints = {name: tool["annotations"] for name, tool in listed.items()}
    assert {n for n, h in hints.items() if h["readOnlyHint"]} == {"list_agents", "wait_agent"}
    assert {n for n, h in hints.items() if h["destructiveHint"]} == {"interrupt_agent"}
    assert {n for n, h in hints.items() if h["openWorldHint"]} == {"send_message", "followup_task", "reply",
                                                                   "interrupt_agent", "answer_approval"}
    assert {n for n, h in hints.items() if h["idempotentHint"]} == {"list_agents", "wait_agent"}
    assert all(h["title"] for h in hints.values())
