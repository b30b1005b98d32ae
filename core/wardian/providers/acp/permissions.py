"""Wardian's MCP server as an ACP agent is given it (`mcpServers` of `session/new` and `session/load`), and the
answers to the agent's `session/request_permission` (docs/guide/acp.md#permissions).

Nothing is written into the agent's own config for wardian: the server entry (the wardian command, `mcp serve`,
the home, the generation's session and `WARDIAN_MCP_ANNOUNCE=1`) travels in the session request only.

Permissions: a wardian tool runs when the agent may always run it (`list_agents`, `wait_agent`,
`receive_messages`: they read or wait) or when the agent's `--approve-tools` granted it; the answer is the request's
allow-once option. Any other request has nobody to answer it in an app-owned agent: it is rejected (the
reject-once option), logged, and told to the app (`refusal`), which records it where the person sees it. While a
turn is being cancelled every request is answered `cancelled`, as ACP asks of a client (an agent may keep the turn
alive until it is).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from wardian.home import ENV_HOME, ENV_MCP_ANNOUNCE, ENV_SESSION, Home
from wardian.model import PermissionOption
from wardian.protocol.tools import SERVER_NAME, parse_tool_names
from wardian.providers.base import PermissionAnswered
from wardian.providers.mcp_command import SERVE_ARGS, wardian_executable

log = logging.getLogger("wardian.acp")

UNGRANTED = ("wait_agent", "receive_messages", "list_agents")
"""The wardian tools an agent may always run: they read or wait, and change nothing another agent sees."""
_PREFIX = f"mcp__{SERVER_NAME}__"
_MCP_TITLE = re.compile(r"(?P<tool>[A-Za-z0-9_-]+) \((?P<server>[A-Za-z0-9_-]+) MCP Server\)")


def mcp_server(home: Home, session: str) -> dict[str, Any]:
    """The `mcpServers` entry of wardian's MCP server for this generation's session. Raises: CliNotFound."""
    env = {ENV_HOME: str(home.root), ENV_SESSION: session, ENV_MCP_ANNOUNCE: "1"}
    return {"name": SERVER_NAME, "command": str(wardian_executable()), "args": list(SERVE_ARGS),
            "env": [{"name": k, "value": v} for k, v in env.items()]}


def granted(grants: tuple[str, ...]) -> frozenset[str]:
    """The wardian tools that run without asking. Raises: InvalidArguments (a name that is no wardian tool)."""
    return frozenset(parse_tool_names([*UNGRANTED, *parse_tool_names(list(grants))]))


def tool_of(params: dict[str, Any]) -> str:
    """The tool a permission request is for, as `mcp__<server>__<tool>` for an MCP tool: Qwen Code names it in
    `_meta.toolName`; Gemini CLI titles the call `<tool> (<server> MCP Server)`."""
    call = params.get("toolCall")
    call = call if isinstance(call, dict) else {}
    meta = call.get("_meta")
    name = meta.get("toolName") if isinstance(meta, dict) else None
    if name:
        return str(name)
    title = str(call.get("title") or "")
    titled = _MCP_TITLE.fullmatch(title)
    return f"mcp__{titled['server']}__{titled['tool']}" if titled else title


def _option(params: dict[str, Any], kind: str) -> str | None:
    for option in params.get("options") or []:
        if isinstance(option, dict) and option.get("kind") == kind and isinstance(option.get("optionId"), str):
            return str(option["optionId"])
    return None


def refusal(params: dict[str, Any], result: dict[str, Any], turn_id: str | None) -> PermissionAnswered | None:
    """What the app records of a request `answer` did not allow (None: it allowed it)."""
    outcome = result.get("outcome") or {}
    options = tuple(PermissionOption(str(o.get("optionId") or ""), str(o.get("name") or ""), str(o.get("kind") or ""))
                    for o in params.get("options") or [] if isinstance(o, dict))
    chosen = next((o for o in options if o.option_id == outcome.get("optionId")), None)
    if chosen is not None and chosen.kind.startswith("allow"):
        return None
    call = params.get("toolCall")
    title = str(call.get("title") or "") if isinstance(call, dict) else ""
    return PermissionAnswered(turn_id, tool_of(params) or "a tool", title, options, "rejected")


def answer(agent: str, params: dict[str, Any], allowed: frozenset[str], *, cancelling: bool) -> dict[str, Any]:
    """The result of one `session/request_permission` (module docstring)."""
    if cancelling:
        return {"outcome": {"outcome": "cancelled"}}
    tool = tool_of(params)
    wardian_tool = tool.removeprefix(_PREFIX) if tool.startswith(_PREFIX) else None
    if wardian_tool is not None and wardian_tool in allowed:
        choice = _option(params, "allow_once")
    else:
        log.warning("%s: the agent asked to run %s, which %s; refused", agent, tool or "a tool",
                    "the agent's --approve-tools do not grant" if wardian_tool else "nobody may approve here")
        choice = _option(params, "reject_once")
    if choice is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": choice}}
