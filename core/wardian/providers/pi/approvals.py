"""Answers to the confirmations Pi's extensions ask the client for (`extension_ui_request`; docs/guide/pi.md#approvals,
docs/guide/approvals.md#pi).

Pi has no approval step of its own. Wardian's extension gives it one for wardian's tools: before a tool that changes
what another agent sees (`send_message`, `followup_task`, `reply`, `interrupt_agent`) runs, it asks
`confirm("Allow wardian's <tool>?")`, and the app answers from the agent's `--approve-tools` grants. The tools that
only read or wait run without asking.

Under `--approvals person|lead` (`WARDIAN_PI_APPROVALS=ask` in Pi's environment, which the extension reads and
removes) the same hook also asks before Pi's own `bash`, `edit` and `write`: `confirm("Allow <tool>?", <its input as
JSON>)`. The runtime hands that one to the app as an approval (`native_ask`) and answers it once the app decided;
a refused call is blocked, and the model reads that it was denied. Any other dialog (another extension's, or a
confirmation of a tool not granted) has nobody to answer it in an app-owned agent: it is refused and logged.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from wardian.model import PermissionOption
from wardian.protocol.tools import parse_tool_names
from wardian.providers.approvals import ApprovalAsk
from wardian.providers.asking import Asked, OpenAsks
from wardian.providers.pi.rpc import Peer

log = logging.getLogger("wardian.pi")

UNGRANTED = ("wait_agent", "receive_messages", "list_agents")
"""The wardian tools an agent may always run: they read or wait, and change nothing another agent sees. The extension
asks for the others only."""
CONFIRM_TITLE = "Allow wardian's {tool}?"
_TITLE = re.compile(r"Allow wardian's (?P<tool>[a-z_]+)\?")
ENV_APPROVALS = "WARDIAN_PI_APPROVALS"
"""Set to `ask` in Pi's environment under an asking policy: the extension then asks before `NATIVE` tools too."""
NATIVE = ("bash", "edit", "write")
_NATIVE_TITLE = re.compile(r"Allow (?P<tool>bash|edit|write)\?")
MAX_TEXT = 2000
_OPTIONS = (PermissionOption("confirmed", "Allow", "allow_once"), PermissionOption("refused", "Deny", "reject_once"))


def native_tool(request: dict[str, Any]) -> str | None:
    """The Pi tool a confirmation asks about when it is the extension's approval of `bash`, `edit` or `write`."""
    if request.get("method") != "confirm":
        return None
    asked = _NATIVE_TITLE.fullmatch(str(request.get("title") or ""))
    return asked["tool"] if asked else None


def _trim(value: Any) -> Any:
    return value[:MAX_TEXT] + "…" if isinstance(value, str) and len(value) > MAX_TEXT else value


def _lines(text: Any) -> int:
    return len(str(text).splitlines()) if text else 0


def native_ask(request: dict[str, Any], tool: str, turn_id: str | None, cwd: str) -> ApprovalAsk:
    """The approval the extension's confirmation of Pi's `tool` asks for (its message is the call's input as JSON):
    bash's command in the workspace, or the file written or edited with its +/- line counts."""
    try:
        given = json.loads(str(request.get("message") or "{}"))
    except ValueError:
        given = {}
    tool_input: dict[str, Any] = given if isinstance(given, dict) else {}
    detail: dict[str, Any] = {"tool": tool, "input": {str(k): _trim(v) for k, v in list(tool_input.items())[:20]}}
    if tool == "bash":
        command = str(_trim(tool_input.get("command") or ""))
        detail.update(command=command, cwd=cwd)
        return ApprovalAsk(turn_id, "command", f"run `{command}` in {cwd}", detail, _OPTIONS, tool=tool)
    path = str(tool_input.get("path") or "")
    if tool == "write":
        plus, minus = _lines(tool_input.get("content")), 0
    else:
        edits = [e for e in tool_input.get("edits") or [] if isinstance(e, dict)]
        plus, minus = sum(_lines(e.get("newText")) for e in edits), sum(_lines(e.get("oldText")) for e in edits)
    detail.update(files=[path], diff_summary=f"+{plus} -{minus}")
    return ApprovalAsk(turn_id, "file_change", f"{tool} {path} (+{plus} -{minus})", detail, _OPTIONS, tool=tool)


def granted(grants: tuple[str, ...]) -> frozenset[str]:
    """The wardian tools that run without asking. Raises: InvalidArguments (a name that is no wardian tool)."""
    return frozenset(parse_tool_names([*UNGRANTED, *parse_tool_names(list(grants))]))


def answer(agent: str, request: dict[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    """The `extension_ui_response` fields for one dialog request (module docstring)."""
    title = str(request.get("title") or "")
    if request.get("method") != "confirm":
        log.warning("%s: an extension of Pi asked %r (%s), which nobody answers here; cancelled", agent, title[:200],
                    request.get("method"))
        return {"cancelled": True}
    asked = _TITLE.fullmatch(title)
    tool = asked["tool"] if asked else None
    if tool is not None and tool in allowed:
        return {"confirmed": True}
    log.warning("%s: Pi asked to confirm %r, which %s; refused", agent, title[:200],
                "the agent's --approve-tools do not grant" if tool else "nobody may approve here")
    return {"confirmed": False}


async def decide(asks: OpenAsks, peer: Peer, request_id: str, asked: Asked | None) -> None:
    """Pi's own tool call, asked of the app (by the reader, `OpenAsks.open`): confirmed once it allowed it, else
    refused (the extension blocks the call, and the model reads that it was denied). A withdrawn one is refused too:
    Pi's dialog waits until answered, even after an abort."""
    decision = await asks.decision(asked)
    await peer.answer_dialog(request_id, {"confirmed": decision is not None and decision.allow})
