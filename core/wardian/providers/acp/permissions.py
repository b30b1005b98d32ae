"""Wardian's MCP server as an ACP agent is given it (`mcpServers` of `session/new` and `session/load`), and the
answers to the agent's `session/request_permission` (docs/guide/acp.md#permissions).

Nothing is written into the agent's own config for wardian: the server entry (the wardian command, `mcp serve`,
the home, the generation's session and `WARDIAN_MCP_ANNOUNCE=1`) travels in the session request only.

Permissions: a wardian tool runs when the agent may always run it (`list_agents`, `wait_agent`,
`receive_messages`: they read or wait) or when the agent's `--approve-tools` granted it; the answer is the request's
allow-once option. Any other request becomes an approval (`ask_of`, docs/guide/approvals.md) the app records and
routes by the agent's policy; its decision is answered with the offered option of its kind (`answer_of`). While a
turn is being cancelled every request is answered `cancelled`, as ACP asks of a client (an agent may keep the turn
alive until it is), and so is one whose approval was withdrawn.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from wardian.home import ENV_HOME, ENV_MCP_ANNOUNCE, ENV_SESSION, Home
from wardian.model import PermissionOption
from wardian.protocol.tools import SERVER_NAME, parse_tool_names
from wardian.providers.acp.rpc import Deferred
from wardian.providers.approvals import ApprovalAsk, ApprovalAsked, ApprovalReply, Decision, redact
from wardian.providers.mcp_command import SERVE_ARGS, wardian_executable

log = logging.getLogger("wardian.acp")

UNGRANTED = ("wait_agent", "receive_messages", "list_agents")
"""The wardian tools an agent may always run: they read or wait, and change nothing another agent sees."""
_PREFIX = f"mcp__{SERVER_NAME}__"
_CANCELLED = {"outcome": {"outcome": "cancelled"}}
_TRIM = 2000
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


def ask_of(params: dict[str, Any], turn_id: str | None) -> ApprovalAsk:
    """The approval a request asks, in plain words (`ApprovalAsk`): ACP's tool call `kind` says what it is (`execute`:
    a command, `edit`/`delete`/`move`: files), its `rawInput` the command and directory, its `content` the diffs."""
    call = params.get("toolCall")
    call = call if isinstance(call, dict) else {}
    raw = call.get("rawInput")
    raw = raw if isinstance(raw, dict) else {}
    title = str(call.get("title") or "")
    # A tool's name, never the title it falls back to (Gemini CLI titles a shell call with its command line).
    tool = tool_of(params) or None
    tool = None if tool == title else tool
    options = tuple(PermissionOption(str(o.get("optionId") or ""), str(o.get("name") or ""), str(o.get("kind") or ""))
                    for o in params.get("options") or [] if isinstance(o, dict))
    files = [str(loc.get("path")) for loc in call.get("locations") or [] if isinstance(loc, dict) and loc.get("path")]
    diffs = [c for c in call.get("content") or [] if isinstance(c, dict) and c.get("type") == "diff"]
    files += [str(d.get("path")) for d in diffs if d.get("path") and str(d.get("path")) not in files]
    kind_of = call.get("kind")
    detail: dict[str, Any] = {"tool": tool, "title": title[:_TRIM], "input": _trimmed(raw)}
    if kind_of == "execute" or raw.get("command"):
        command = str(raw.get("command") or title)
        cwd = raw.get("directory") or raw.get("cwd")
        detail.update(command=command[:_TRIM], cwd=cwd)
        return ApprovalAsk(turn_id, "command", f"run `{command[:200]}`" + (f" in {cwd}" if cwd else ""),
                           detail, options, tool)
    if kind_of in ("edit", "delete", "move") or diffs:
        added = sum(len(str(d.get("newText") or "").splitlines()) for d in diffs)
        removed = sum(len(str(d.get("oldText") or "").splitlines()) for d in diffs)
        detail.update(files=files, diff_summary=f"+{added} -{removed}")
        shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        return ApprovalAsk(turn_id, "file_change", f"{kind_of or 'edit'} {shown or title[:200]} (+{added} -{removed})",
                           detail, options, tool)
    return ApprovalAsk(turn_id, "tool", f"use {tool or 'a tool'}" + (f": {title[:200]}" if title else ""),
                       detail, options, tool)


def _trimmed(raw: dict[str, Any]) -> dict[str, Any]:
    return {str(k)[:80]: (v[:_TRIM] if isinstance(v, str) else v) for k, v in list(raw.items())[:20]
            if isinstance(v, str | int | float | bool) or v is None}


def answer_of(params: dict[str, Any], decision: Decision | None) -> dict[str, Any]:
    """The result of a request the app decided (None: withdrawn, `cancelled`): the offered option of the decision's
    kind (allow always only when asked for and offered, else allow once; a deny, reject once)."""
    if decision is None:
        return _CANCELLED
    kinds = (("allow_always", "allow_once") if decision.always else ("allow_once",)) if decision.allow else (
        "reject_once", "reject_always")
    choice = next((c for kind in kinds if (c := _option(params, kind)) is not None), None)
    return _CANCELLED if choice is None else {"outcome": {"outcome": "selected", "optionId": choice}}


def answer(agent: str, params: dict[str, Any], allowed: frozenset[str], *, cancelling: bool) -> dict[str, Any] | None:
    """The result the runtime gives a `session/request_permission` itself; None: the app decides it (module
    docstring)."""
    if cancelling:
        return _CANCELLED
    tool = tool_of(params)
    wardian_tool = tool.removeprefix(_PREFIX) if tool.startswith(_PREFIX) else None
    if wardian_tool is None or wardian_tool not in allowed:
        return None
    choice = _option(params, "allow_once")
    if choice is None:
        log.warning("%s: the agent offered no allow-once option for %s; cancelled", agent, tool)
        return _CANCELLED
    return {"outcome": {"outcome": "selected", "optionId": choice}}


class Asks:
    """The permission requests the app is deciding for one process: each handed to the app (`ApprovalAsked`, with
    the agent's credential values redacted) and answered later, from a task of the reader's own (`Deferred`)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        self._secrets = list(secrets)
        self._open: set[ApprovalReply] = set()

    def ask(self, params: dict[str, Any], turn_id: str, emit: Callable[[ApprovalAsked], None]) -> Deferred:
        reply = ApprovalReply()
        self._open.add(reply)
        emit(ApprovalAsked(redact(ask_of(params, turn_id), self._secrets), reply))
        return Deferred(partial(self._answer, params, reply))

    async def _answer(self, params: dict[str, Any], reply: ApprovalReply) -> dict[str, Any]:
        """Its decision, or `cancelled` once withdrawn (the turn ended or is being cancelled, the process is going)."""
        try:
            decision = await reply.wait()
        finally:
            reply.withdraw()
            self._open.discard(reply)
        return answer_of(params, decision)

    def withdraw_all(self) -> None:
        for reply in list(self._open):
            reply.withdraw()
