"""Codex's approval requests as wardian approvals, and wardian's decisions as Codex's answers
(docs/guide/approvals.md#codex).

Under `--approvals person|lead` the app-server runs with `approval_policy = "on-request"` (unless the agent's own
`-c` chose another policy that asks): the model asks to run a command outside the sandbox, or to write where the
sandbox does not let it, and Codex sends the client a server request. Codex 0.171.0 refuses `untrusted`.

```
item/commandExecution/requestApproval {turnId, itemId, command, cwd, reason, availableDecisions}
    -> {"decision": "accept" | "acceptForSession" | {"acceptWithExecpolicyAmendment": ...} | "decline"}
item/fileChange/requestApproval {turnId, itemId, reason, grantRoot}   (the files: the fileChange item's `changes`)
    -> {"decision": "accept" | "acceptForSession" | "decline"}
mcpServer/elicitation/request {turnId, serverName, message, _meta: {codex_approval_kind: "mcp_tool_call", ...}}
    -> {"action": "accept", "content": {}} | {"action": "decline", "content": null}
```
A `decline` lets the turn go on, and Codex tells the model the command was "rejected by user" (it has no field for a
reason). "Allow always" is `acceptForSession` where Codex offers it, else the execpolicy amendment it proposes (a
rule kept in the agent's private Codex home), else a plain `accept`. An elicitation that is not a tool's approval (a
server asking for a filled form) is declined, as before: nobody can fill it in here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wardian.model import PermissionOption
from wardian.providers.approvals import ApprovalAsk, Decision
from wardian.providers.asking import policy_asks

COMMAND = "item/commandExecution/requestApproval"
FILE_CHANGE = "item/fileChange/requestApproval"
ELICITATION = "mcpServer/elicitation/request"
ASKING_POLICY = "on-request"
SHELL_TOOL = "shell"
"""The tool name an approval of a Codex command carries, for allow rules (Codex's own name for its shell tools)."""
MAX_TEXT = 2000
"""How much of a command or of a tool's input an approval keeps (a person reads a line, not a script)."""

_OPTIONS = {
    "accept": PermissionOption("accept", "Allow once", "allow_once"),
    "acceptForSession": PermissionOption("acceptForSession", "Allow for this session", "allow_always"),
    "acceptWithExecpolicyAmendment": PermissionOption("acceptWithExecpolicyAmendment",
                                                      "Allow always (a rule for commands like this one)",
                                                      "allow_always"),
    "decline": PermissionOption("decline", "Deny", "reject_once"),
    "cancel": PermissionOption("cancel", "Deny and end the turn", "reject_once"),
}
_FILE_DECISIONS = ("accept", "acceptForSession", "decline", "cancel")


def launch_overrides(policy: str, overrides: tuple[str, ...]) -> tuple[str, ...]:
    """The `-c` settings that make the app-server ask under `policy`: `approval_policy="on-request"` added when the
    agent's own settings leave the policy unset, or set it to `never` (which would never ask); another policy of the
    agent's own that asks stays."""
    if not policy_asks(policy):
        return ()
    own = [o.partition("=")[2].strip().strip("\"'") for o in overrides if o.partition("=")[0].strip() ==
           "approval_policy"]
    if own and own[-1] != "never":
        return ()
    return (f'approval_policy="{ASKING_POLICY}"',)


def _trim(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _decision_names(params: Mapping[str, Any]) -> list[str]:
    """The decisions Codex offers for this request (`availableDecisions`; an object names its only key)."""
    names: list[str] = []
    for offered in params.get("availableDecisions") or []:
        if isinstance(offered, str):
            names.append(offered)
        elif isinstance(offered, dict) and len(offered) == 1:
            names.append(str(next(iter(offered))))
    return names


def _options(names: list[str]) -> tuple[PermissionOption, ...]:
    # Codex takes `decline` even where it does not list it (checked with 0.171.0): wardian's deny is always it.
    return tuple(_OPTIONS[n] for n in dict.fromkeys([*names, "decline"]) if n in _OPTIONS)


def command_ask(params: Mapping[str, Any]) -> ApprovalAsk:
    """The approval a command request asks for: the command and its directory."""
    command = _trim(str(params.get("command") or ""))
    cwd = str(params.get("cwd") or "")
    detail: dict[str, Any] = {"command": command, "cwd": cwd}
    if params.get("reason"):
        detail["reason"] = _trim(str(params["reason"]))
    summary = f"run `{command}`" + (f" in {cwd}" if cwd else "")
    return ApprovalAsk(_turn(params), "command", summary, detail, _options(_decision_names(params) or ["accept"]),
                       tool=SHELL_TOOL)


def file_change_ask(params: Mapping[str, Any], changes: list[dict[str, Any]]) -> ApprovalAsk:
    """The approval a file change request asks for: the files (from its item, seen before the request) and a diff
    summary."""
    files = [str(c.get("path") or "") for c in changes]
    added = removed = 0
    for change in changes:
        kind = (change.get("kind") or {}).get("type") if isinstance(change.get("kind"), dict) else None
        plus, minus = _diff_counts(str(change.get("diff") or ""), kind)
        added, removed = added + plus, removed + minus
    diff_summary = f"+{added} -{removed}"
    detail: dict[str, Any] = {"files": files, "diff_summary": diff_summary}
    for key in ("reason", "grantRoot"):
        if params.get(key):
            detail["grant_root" if key == "grantRoot" else key] = _trim(str(params[key]))
    what = files[0] if len(files) == 1 else f"{len(files)} files"
    summary = f"edit {what} ({diff_summary})" if files else "change files" + (
        f" under {params['grantRoot']}" if params.get("grantRoot") else "")
    return ApprovalAsk(_turn(params), "file_change", summary, detail, _options(list(_FILE_DECISIONS)),
                       tool="apply_patch")


def _diff_counts(diff: str, kind: str | None) -> tuple[int, int]:
    lines = diff.splitlines()
    if kind == "add":
        return len(lines), 0
    if kind == "delete":
        return 0, len(lines)
    plus = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    minus = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return plus, minus


def elicitation_ask(params: Mapping[str, Any]) -> ApprovalAsk | None:
    """The approval an MCP tool call asks for (None: the elicitation is no tool approval)."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or meta.get("codex_approval_kind") != "mcp_tool_call":
        return None
    server = str(params.get("serverName") or "")
    tool = str(meta.get("tool_name") or meta.get("tool_title") or "")
    name = f"mcp__{server}__{tool}" if tool else f"mcp__{server}"
    tool_input = meta.get("tool_params")
    message = _trim(str(params.get("message") or ""))
    detail: dict[str, Any] = {"server": server, "tool": tool or None, "message": message}
    if isinstance(tool_input, dict):
        detail["input"] = _trimmed_input(tool_input)
    summary = f"use {tool or 'a tool'} of MCP server {server}" if server else message
    options = (PermissionOption("accept", "Allow", "allow_once"), PermissionOption("decline", "Deny", "reject_once"))
    return ApprovalAsk(_turn(params), "tool", summary, detail, options, tool=name)


def _trimmed_input(tool_input: dict[str, Any]) -> dict[str, Any]:
    return {str(k): _trim(v) if isinstance(v, str) else v for k, v in list(tool_input.items())[:20]}


def _turn(params: Mapping[str, Any]) -> str | None:
    turn = params.get("turnId")
    return str(turn) if turn else None


def command_answer(decision: Decision | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """Codex's answer to a command request: `decline` on a deny or a withdrawn approval."""
    if decision is None or not decision.allow:
        return {"decision": "decline"}
    if decision.always:
        for offered in params.get("availableDecisions") or []:
            if offered == "acceptForSession":
                return {"decision": "acceptForSession"}
        for offered in params.get("availableDecisions") or []:
            if isinstance(offered, dict) and "acceptWithExecpolicyAmendment" in offered:
                return {"decision": offered}
    return {"decision": "accept"}


def file_change_answer(decision: Decision | None) -> dict[str, Any]:
    """Codex's answer to a file change request."""
    if decision is None or not decision.allow:
        return {"decision": "decline"}
    return {"decision": "acceptForSession" if decision.always else "accept"}


def elicitation_answer(decision: Decision | None) -> dict[str, Any]:
    """Codex's answer to an MCP tool's approval (an accepted one carries an empty form: it asks for no input)."""
    if decision is None or not decision.allow:
        return {"action": "decline", "content": None}
    return {"action": "accept", "content": {}}


class FileChanges:
    """The file changes Codex announced (`item/started` of a `fileChange` item), by item id, until their request
    comes: the request itself names only the item. Fed from the client's tap, which sees notifications in wire order,
    before the request that follows them."""

    def __init__(self) -> None:
        self._changes: dict[str, list[dict[str, Any]]] = {}

    def saw(self, method: str, params: Mapping[str, Any]) -> None:
        item = params.get("item")
        if not isinstance(item, dict) or item.get("type") != "fileChange":
            return
        if method == "item/started":
            self._changes[str(item.get("id"))] = [c for c in item.get("changes") or [] if isinstance(c, dict)]
        elif method == "item/completed":
            self._changes.pop(str(item.get("id")), None)

    def of(self, item_id: str) -> list[dict[str, Any]]:
        return self._changes.get(item_id, [])
