"""The answers to an ACP agent's `session/request_permission` (docs/guide/acp.md#permissions), on the request shapes
Qwen Code 0.24.4 and Gemini CLI 0.61.0 send (their options and tool-call fields as observed)."""

from __future__ import annotations

from typing import Any

import pytest

from wardian import errors
from wardian.providers.acp import permissions

QWEN_OPTIONS = [{"optionId": "proceed_always_project", "kind": "allow_always"},
                {"optionId": "proceed_always_user", "kind": "allow_always"},
                {"optionId": "proceed_once", "kind": "allow_once"}, {"optionId": "cancel", "kind": "reject_once"}]
GEMINI_OPTIONS = [{"optionId": "proceed_always_server", "kind": "allow_always"},
                  {"optionId": "proceed_always_tool", "kind": "allow_always"},
                  {"optionId": "proceed_once", "kind": "allow_once"}, {"optionId": "cancel", "kind": "reject_once"}]


def qwen(tool: str, server: str | None = "wardian") -> dict[str, Any]:
    name = f"mcp__{server}__{tool}" if server else tool
    return {"options": QWEN_OPTIONS, "toolCall": {"toolCallId": "call_9", "title": "{}", "_meta": {"toolName": name}}}


def gemini(tool: str, server: str = "wardian") -> dict[str, Any]:
    return {"options": GEMINI_OPTIONS, "toolCall": {"toolCallId": f"mcp_{server}_{tool}__x", "status": "pending",
                                                     "title": f"{tool} ({server} MCP Server)", "kind": "other"}}


def selected(answer: dict[str, Any]) -> str | None:
    outcome = answer["outcome"]
    return outcome.get("optionId") if outcome["outcome"] == "selected" else outcome["outcome"]


@pytest.mark.parametrize("request_for", [qwen, gemini])
def test_a_granted_or_always_allowed_wardian_tool_gets_the_allow_once_option(request_for: Any) -> None:
    allowed = permissions.granted(("send_message",))
    for tool in ("send_message", "list_agents", "wait_agent", "receive_messages"):
        assert selected(permissions.answer("a", request_for(tool), allowed, cancelling=False)) == "proceed_once"


@pytest.mark.parametrize("request_for", [qwen, gemini])
def test_an_ungranted_wardian_tool_and_any_other_tool_get_the_reject_option(request_for: Any) -> None:
    allowed = permissions.granted(())
    assert selected(permissions.answer("a", request_for("reply"), allowed, cancelling=False)) == "cancel"
    other = gemini("echo", "echosrv") if request_for is gemini else qwen("run_shell_command", None)
    assert selected(permissions.answer("a", other, allowed, cancelling=False)) == "cancel"


def test_while_a_turn_is_cancelled_every_request_is_answered_cancelled() -> None:
    """ACP asks a client that cancels to answer pending permission requests `cancelled` (Gemini CLI keeps the turn
    alive until it does)."""
    answer = permissions.answer("a", gemini("list_agents"), permissions.granted(()), cancelling=True)
    assert answer == {"outcome": {"outcome": "cancelled"}}


def test_a_request_without_a_reject_option_is_answered_cancelled() -> None:
    request = {"options": [{"optionId": "ok", "kind": "allow_once"}], "toolCall": {"title": "rm -rf"}}
    assert permissions.answer("a", request, permissions.granted(()), cancelling=False) == {
        "outcome": {"outcome": "cancelled"}}


def test_a_grant_that_is_no_wardian_tool_is_refused() -> None:
    with pytest.raises(errors.InvalidArguments):
        permissions.granted(("run_shell_command",))


@pytest.mark.parametrize("request_for", [qwen, gemini])
def test_a_refused_request_is_told_to_the_app_and_an_allowed_one_is_not(request_for: Any) -> None:
    """What the app records of a request nobody may answer (docs/guide/acp.md#permissions): the tool, the agent's
    title, every option offered and the answer; nothing of one a grant allowed."""
    allowed = permissions.granted(("send_message",))
    granted = request_for("send_message")
    assert permissions.refusal(granted, permissions.answer("a", granted, allowed, cancelling=False), "t1") is None
    refused = request_for("reply")
    told = permissions.refusal(refused, permissions.answer("a", refused, allowed, cancelling=False), "t1")
    assert told is not None
    assert (told.turn_id, told.tool, told.title, told.answer) == (
        "t1", "mcp__wardian__reply", refused["toolCall"]["title"], "rejected")
    assert [(o.option_id, o.kind) for o in told.options] == [(o["optionId"], o["kind"]) for o in refused["options"]]


def test_a_request_answered_cancelled_for_want_of_a_reject_option_is_told_as_rejected() -> None:
    request = {"options": [{"optionId": "ok", "kind": "allow_once"}], "toolCall": {"title": "rm -rf"}}
    answer = permissions.answer("a", request, permissions.granted(()), cancelling=False)
    told = permissions.refusal(request, answer, None)
    assert told is not None
    assert (told.tool, told.title, told.answer) == ("rm -rf", "rm -rf", "rejected")
