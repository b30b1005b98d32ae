"""The answers to an ACP agent's `session/request_permission` (docs/guide/acp.md#permissions), on the request shapes
Qwen Code 0.24.4 and Gemini CLI 0.61.0 send (their options and tool-call fields as observed)."""

from __future__ import annotations

from typing import Any

import pytest

from wardian import errors
from wardian.providers.acp import permissions
from wardian.providers.approvals import Decision

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


def selected(answer: dict[str, Any] | None) -> str | None:
    assert answer is not None
    outcome = answer["outcome"]
    return outcome.get("optionId") if outcome["outcome"] == "selected" else outcome["outcome"]


@pytest.mark.parametrize("request_for", [qwen, gemini])
def test_a_granted_or_always_allowed_wardian_tool_gets_the_allow_once_option(request_for: Any) -> None:
    allowed = permissions.granted(("send_message",))
    for tool in ("send_message", "list_agents", "wait_agent", "receive_messages"):
        assert selected(permissions.answer("a", request_for(tool), allowed, cancelling=False)) == "proceed_once"


@pytest.mark.parametrize("request_for", [qwen, gemini])
def test_an_ungranted_wardian_tool_and_any_other_tool_are_left_to_the_app(request_for: Any) -> None:
    allowed = permissions.granted(())
    assert permissions.answer("a", request_for("reply"), allowed, cancelling=False) is None
    other = gemini("echo", "echosrv") if request_for is gemini else qwen("run_shell_command", None)
    assert permissions.answer("a", other, allowed, cancelling=False) is None


def test_while_a_turn_is_cancelled_every_request_is_answered_cancelled() -> None:
    """ACP asks a client that cancels to answer pending permission requests `cancelled` (Gemini CLI keeps the turn
    alive until it does)."""
    answer = permissions.answer("a", gemini("list_agents"), permissions.granted(()), cancelling=True)
    assert answer == {"outcome": {"outcome": "cancelled"}}


def test_a_grant_that_is_no_wardian_tool_is_refused() -> None:
    with pytest.raises(errors.InvalidArguments):
        permissions.granted(("run_shell_command",))


@pytest.mark.parametrize("request_for", [qwen, gemini])
def test_a_decision_is_answered_with_the_offered_option_of_its_kind(request_for: Any) -> None:
    """docs/guide/approvals.md: allow once, allow always (when offered), reject once; withdrawn: `cancelled`."""
    request = request_for("reply")
    assert selected(permissions.answer_of(request, Decision(allow=True))) == "proceed_once"
    assert selected(permissions.answer_of(request, Decision(allow=True, always=True))) == request["options"][0][
        "optionId"]
    assert selected(permissions.answer_of(request, Decision(allow=False, reason="no"))) == "cancel"
    assert selected(permissions.answer_of(request, None)) == "cancelled"


def test_a_decision_whose_kind_was_not_offered_is_answered_cancelled() -> None:
    request = {"options": [{"optionId": "ok", "kind": "allow_once"}], "toolCall": {"title": "rm -rf"}}
    assert permissions.answer_of(request, Decision(allow=False)) == {"outcome": {"outcome": "cancelled"}}


def test_a_shell_command_is_asked_as_a_command_with_its_directory() -> None:
    """Qwen Code's `run_shell_command` request (kind `execute`, its command and directory in `rawInput`)."""
    request = {"options": QWEN_OPTIONS, "toolCall": {
        "toolCallId": "c1", "title": "mkdir /w/x", "kind": "execute",
        "rawInput": {"command": "mkdir /w/x", "directory": "/w", "description": "make it"},
        "_meta": {"toolName": "run_shell_command"}}}
    ask = permissions.ask_of(request, "t1")
    assert (ask.turn_id, ask.kind, ask.tool, ask.summary) == ("t1", "command", "run_shell_command",
                                                             "run `mkdir /w/x` in /w")
    assert (ask.detail["command"], ask.detail["cwd"]) == ("mkdir /w/x", "/w")
    assert [(o.option_id, o.kind) for o in ask.options] == [(o["optionId"], o["kind"]) for o in QWEN_OPTIONS]


def test_an_edit_is_asked_as_a_file_change_with_its_files_and_diff_summary() -> None:
    request = {"options": GEMINI_OPTIONS, "toolCall": {"title": "Edit a.py", "kind": "edit", "content": [
        {"type": "diff", "path": "/w/a.py", "oldText": "x\ny\n", "newText": "x\nz\nw\n"}]}}
    ask = permissions.ask_of(request, None)
    assert (ask.kind, ask.summary, ask.detail["files"], ask.detail["diff_summary"]) == (
        "file_change", "edit /w/a.py (+3 -2)", ["/w/a.py"], "+3 -2")


def test_an_mcp_tool_is_asked_as_a_tool_with_its_name() -> None:
    ask = permissions.ask_of(gemini("echo", "echosrv"), "t1")
    assert (ask.kind, ask.tool, ask.summary) == ("tool", "mcp__echosrv__echo", "use mcp__echosrv__echo: "
                                                 "echo (echosrv MCP Server)")
