"""Answers to the confirmations Pi's extensions ask the client for (`extension_ui_request`; docs/guide/pi.md#approvals).

Pi has no approval step of its own. Wardian's extension gives it one for wardian's tools: before a tool that changes
what another agent sees (`send_message`, `followup_task`, `reply`, `interrupt_agent`) runs, it asks
`confirm("Allow wardian's <tool>?")`, and the app answers from the agent's `--approve-tools` grants. The tools that
only read or wait run without asking. Any other dialog (another extension's, or a confirmation of a tool not
granted) has nobody to answer it in an app-owned agent: it is refused and logged.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from wardian.protocol.tools import parse_tool_names

log = logging.getLogger("wardian.pi")

UNGRANTED = ("wait_agent", "receive_messages", "list_agents")
"""The wardian tools an agent may always run: they read or wait, and change nothing another agent sees. The extension
asks for the others only."""
CONFIRM_TITLE = "Allow wardian's {tool}?"
_TITLE = re.compile(r"Allow wardian's (?P<tool>[a-z_]+)\?")


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
