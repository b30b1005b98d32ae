"""Claude Code's permission requests as wardian approvals, and wardian's decisions as Claude Code's answers
(docs/guide/approvals.md#claude-code).

Under `--approvals person|lead` Claude Code starts with `--permission-prompt-tool stdio`: a tool call that no
permission rule allows (the agent's `permissions.allow`, its `--approve-tools` grants) is not refused but asked of
wardian as a control request on its output, and answered on its input:

```
out: {"type": "control_request", "request_id": R, "request": {"subtype": "can_use_tool", "tool_name": "Bash",
      "input": {...}, "tool_use_id": ..., "permission_suggestions": [...], "blocked_path": ...}}
in:  {"type": "control_response", "response": {"subtype": "success", "request_id": R, "response":
      {"behavior": "allow", "updatedInput": {...}} | {"behavior": "deny", "message": "..."}}}
out: {"type": "control_cancel_request", "request_id": R}      the request is over (the turn was interrupted)
```
A deny's message is what the model reads. "Allow always" adds Claude Code's own suggested rules for the rest of the
session only (never into a settings file of the person's workspace).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from wardian import errors
from wardian.model import PermissionOption
from wardian.providers.approvals import ApprovalAsk, Decision
from wardian.providers.asking import OpenAsks
from wardian.providers.claude.wire import LineLost, encode

CAN_USE_TOOL = "can_use_tool"
PROMPT_TOOL_ARGS = ("--permission-prompt-tool", "stdio")
MAX_TEXT = 2000
"""How much of a command or of a tool's input an approval keeps (a person reads a line, not a script)."""
_FILE_TOOLS = {"Edit": "edit", "MultiEdit": "edit", "Write": "write", "NotebookEdit": "edit"}
_OPTIONS = (PermissionOption("allow", "Allow once", "allow_once"),
            PermissionOption("allow_session", "Allow for this session", "allow_always"),
            PermissionOption("deny", "Deny", "reject_once"))


def _trim(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + "…"
    return value


def _lines(text: Any) -> int:
    return len(str(text).splitlines()) if text else 0


def ask_of(request: Mapping[str, Any], turn_id: str | None, cwd: str) -> ApprovalAsk:
    """The approval a `can_use_tool` request asks for: Bash's command (in the agent's workspace), an edit's file and
    its +/- line counts, or any other tool with its input."""
    tool = str(request.get("tool_name") or "")
    tool_input = request.get("input") if isinstance(request.get("input"), dict) else {}
    assert isinstance(tool_input, dict)
    trimmed = {str(k): _trim(v) for k, v in list(tool_input.items())[:20]}
    detail: dict[str, Any] = {"tool": tool, "input": trimmed}
    for key in ("blocked_path", "decision_reason"):
        if request.get(key):
            detail[key] = _trim(str(request[key]))
    if tool == "Bash":
        command = str(trimmed.get("command") or "")
        detail.update(command=command, cwd=cwd)
        return ApprovalAsk(turn_id, "command", f"run `{command}` in {cwd}", detail, _OPTIONS, tool=tool)
    if tool in _FILE_TOOLS:
        path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
        plus, minus = _counts(tool, tool_input)
        detail.update(files=[path], diff_summary=f"+{plus} -{minus}")
        return ApprovalAsk(turn_id, "file_change", f"{_FILE_TOOLS[tool]} {path} (+{plus} -{minus})", detail,
                           _OPTIONS, tool=tool)
    return ApprovalAsk(turn_id, "tool", f"use {tool}", detail, _OPTIONS, tool=tool)


def _counts(tool: str, tool_input: Mapping[str, Any]) -> tuple[int, int]:
    if tool == "Write":
        return _lines(tool_input.get("content")), 0
    if tool == "MultiEdit":
        edits = [e for e in tool_input.get("edits") or [] if isinstance(e, dict)]
        return sum(_lines(e.get("new_string")) for e in edits), sum(_lines(e.get("old_string")) for e in edits)
    if tool == "NotebookEdit":
        return _lines(tool_input.get("new_source")), 0
    return _lines(tool_input.get("new_string")), _lines(tool_input.get("old_string"))


def answer_line(request_id: str, request: Mapping[str, Any], decision: Decision | None) -> bytes:
    """The control response that answers request `request_id` with `decision` (None: withdrawn, denied)."""
    result: dict[str, Any]
    if decision is not None and decision.allow:
        result = {"behavior": "allow", "updatedInput": request.get("input") or {}}
        suggestions = [s for s in request.get("permission_suggestions") or [] if isinstance(s, dict)]
        if decision.always and suggestions:
            result["updatedPermissions"] = [{**s, "destination": "session"} for s in suggestions]
    else:
        reason = decision.reason if decision is not None else None
        result = {"behavior": "deny", "message": f"Permission denied: {reason}" if reason else
                  "Permission denied" if decision is not None else "Permission denied: nobody answered in time"}
    return encode({"type": "control_response", "response": {"subtype": "success", "request_id": request_id,
                                                            "response": result}})


class PermissionDesk:
    """One process's `can_use_tool` requests: each handed to the app (`OpenAsks`) and its decision written once. A
    withdrawn one is denied unless Claude Code took the request back, or its turn or process ended first (nobody
    reads an answer then)."""

    def __init__(self, workspace: str, asks: OpenAsks, send: Callable[[bytes], Awaitable[None]],
                 active_turn: Callable[[], str | None], gone: Callable[[], bool]) -> None:
        self._workspace = workspace
        self._asks = asks
        self._send = send
        self._active_turn = active_turn
        self._gone = gone
        self._cancelled: set[str] = set()  # the requests Claude Code took back

    def cancelled(self, request_id: str) -> None:
        """Claude Code took the request back (`control_cancel_request`): its approval is withdrawn."""
        self._cancelled.add(request_id)
        self._asks.cancelled(request_id)

    async def asked(self, request_id: str, request: dict[str, Any]) -> None:
        ask = ask_of(request, self._active_turn(), self._workspace)
        decision = await self._asks.ask(ask, key=request_id)
        over = request_id in self._cancelled or self._gone() or ask.turn_id != self._active_turn()
        self._cancelled.discard(request_id)
        if decision is None and over:
            return
        with contextlib.suppress(errors.ProviderUnavailable, LineLost):
            await self._send(answer_line(request_id, request, decision))
