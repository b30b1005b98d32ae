"""OpenCode's permission requests as wardian approvals, and wardian's decisions as OpenCode's replies
(docs/guide/approvals.md#opencode). Verified against OpenCode 1.18.33.

Under `--approvals person|lead` serve starts with `OPENCODE_PERMISSION={"bash": "ask", "edit": "ask"}` (for each of
the two keys the agent's own `permission` settings leave unset: a rule of the agent's own decides without asking).
A tool call that needs asking pauses, and `/event` says so; wardian's reply resumes it:

```
event  permission.asked    {id: per_…, sessionID, permission: "bash" | "edit" | …, patterns, metadata: {command} |
                            {filepath, diff}, always: [patterns], tool: {messageID, callID}}
POST   /permission/{id}/reply   {"reply": "once" | "always" | "reject", "message": "…"}   -> 200 true
event  permission.replied  {sessionID, requestID, reply}      (whoever replied: wardian, or a person's TUI)
```
A reject carries a message: the model reads it ("The user rejected permission to use this specific tool call with the
following feedback: …") and the loop goes on (a reject without one would end the loop).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio.abc
import httpx2

from wardian import errors
from wardian.model import PermissionOption
from wardian.providers.approvals import ApprovalAsk, Decision
from wardian.providers.asking import OpenAsks, policy_asks
from wardian.providers.opencode import jsonc
from wardian.providers.opencode.wire import NotSent

log = logging.getLogger("wardian.opencode")

ASKED = "permission.asked"
REPLIED = "permission.replied"
ENV_PERMISSION = "OPENCODE_PERMISSION"
ASKING = ("bash", "edit")
"""The permissions an asking policy sets to `ask` (OpenCode's `edit` covers its edit, write and patch tools)."""
MAX_TEXT = 2000
_OPTIONS = (PermissionOption("once", "Allow once", "allow_once"),
            PermissionOption("always", "Allow always (this pattern, for the session)", "allow_always"),
            PermissionOption("reject", "Deny", "reject_once"))


def permission_env(policy: str, config_text: str) -> dict[str, str]:
    """The environment that makes serve ask under `policy`, given the agent's own `opencode.json` text: `ask` for
    each of `ASKING` the agent's `permission` settings leave unset (none when they set every permission at once)."""
    if not policy_asks(policy):
        return {}
    try:
        own = jsonc.loads(config_text).get("permission") if config_text.strip() else None
    except (ValueError, AttributeError):
        own = None
    if isinstance(own, str):
        return {}
    unset = [key for key in ASKING if not (isinstance(own, dict) and key in own)]
    return {ENV_PERMISSION: json.dumps(dict.fromkeys(unset, "ask"))} if unset else {}


def _trim(value: Any) -> str:
    text = str(value or "")
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def ask_of(props: Mapping[str, Any], turn_id: str | None, cwd: str) -> ApprovalAsk:
    """The approval a `permission.asked` event asks for: a command and the workspace, a file and its +/- lines, or
    the permission and its patterns."""
    permission = str(props.get("permission") or "")
    meta = props.get("metadata") if isinstance(props.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    patterns = [_trim(p) for p in props.get("patterns") or []][:20]
    detail: dict[str, Any] = {"permission": permission, "patterns": patterns,
                              "always": [_trim(p) for p in props.get("always") or []][:20]}
    if permission == "bash":
        command = _trim(meta.get("command") or " ".join(patterns))
        detail.update(command=command, cwd=cwd)
        return ApprovalAsk(turn_id, "command", f"run `{command}` in {cwd}", detail, _OPTIONS, tool="bash")
    if permission == "edit":
        path = str(meta.get("filepath") or (patterns[0] if patterns else ""))
        diff = str(meta.get("diff") or "").splitlines()
        plus = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
        minus = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
        detail.update(files=[path], diff_summary=f"+{plus} -{minus}")
        return ApprovalAsk(turn_id, "file_change", f"edit {path} (+{plus} -{minus})", detail, _OPTIONS, tool="edit")
    summary = f"{permission}: {', '.join(patterns)}" if patterns else permission
    return ApprovalAsk(turn_id, "tool", _trim(summary), detail, _OPTIONS, tool=permission or None)


def reply_body(decision: Decision | None) -> dict[str, str]:
    """The body of `POST /permission/{id}/reply` for `decision` (None: withdrawn while OpenCode still waits)."""
    if decision is not None and decision.allow:
        return {"reply": "always" if decision.always else "once"}
    if decision is None:
        return {"reply": "reject", "message": "Permission denied: nobody answered in time"}
    return {"reply": "reject", "message": f"Permission denied: {decision.reason}" if decision.reason else
            "Permission denied"}


class PermissionDesk:
    """One serve's permission requests: each `permission.asked` handed to the app (`OpenAsks`) and its decision
    replied once. A request someone else replied to (a person's TUI) is withdrawn and never replied again; a withdrawn
    one is rejected unless its loop ended first (OpenCode took it back)."""

    def __init__(self, name: str, workspace: str, asks: OpenAsks,
                 request: Callable[..., Awaitable[httpx2.Response]], active_turn: Callable[[], str | None]) -> None:
        self._name = name
        self._workspace = workspace
        self._asks = asks
        self._request = request
        self._active_turn = active_turn
        self._replied: set[str] = set()  # requests someone replied to (wardian, or a person's TUI)

    def event(self, kind: str, props: dict[str, Any], tg: anyio.abc.TaskGroup | None) -> None:
        if kind == REPLIED:
            request_id = str(props.get("requestID"))
            self._replied.add(request_id)
            self._asks.cancelled(request_id)  # replied to elsewhere: no answer of ours is read
        elif tg is not None:
            tg.start_soon(self._asked, props)

    async def _asked(self, props: dict[str, Any]) -> None:
        request_id = str(props.get("id"))
        ask = ask_of(props, self._active_turn(), self._workspace)
        decision = await self._asks.ask(ask, key=request_id)
        over = request_id in self._replied or ask.turn_id != self._active_turn()
        self._replied.discard(request_id)
        if decision is None and over:
            return
        try:
            response = await self._request("POST", f"/permission/{request_id}/reply", json=reply_body(decision))
        except (NotSent, errors.WardianError, httpx2.HTTPError) as exc:
            log.warning("%s: could not reply to OpenCode's permission request %s (%s)", self._name, request_id,
                        type(exc).__name__)
            return
        if response.status_code != 200:
            log.warning("%s: OpenCode answered the reply to permission request %s with %s", self._name, request_id,
                        response.status_code)
