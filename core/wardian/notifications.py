"""The notify command (`wardian app run --notify-command`, the team file's `notify`) and the JSON events it is given
on its stdin (docs/guide/approvals.md#notifications). Stdlib only: the CLI and the team file check a command with
the same words, without the app's stack; `wardian.app.notify` runs it."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from wardian import errors

if TYPE_CHECKING:
    from wardian.approvals import Approval
    from wardian.model import TaskEnd

NOTIFY_TIMEOUT_S = 10.0
"""How long a notify command may run before it is killed (with its process group)."""
ALLOWED = 'a command and its arguments: "notify-send wardian", or in a team file a list ["notify-send", "wardian"]'


def parse_notify_command(value: object, field: str = "notify_command") -> tuple[str, ...]:
    """The notify command as argv: a list of strings as given, or a string split as a POSIX shell would (`shlex`),
    without running a shell.

    Raises:
        InvalidArguments: empty, not a string or list of strings, or a string `shlex` cannot split.
    """
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise errors.InvalidArguments(f"{field} cannot be split into words: {exc}", field=field,
                                          allowed=ALLOWED) from None
    elif isinstance(value, list | tuple) and all(isinstance(a, str) for a in value):  # pyright: ignore[reportUnknownVariableType]
        argv = [str(a) for a in value]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    else:
        raise errors.InvalidArguments(f"{field} must be a command line or a list of strings", field=field,
                                      allowed=ALLOWED)
    if not argv or not argv[0].strip() or any("\0" in a for a in argv):
        raise errors.InvalidArguments(f"{field} names no command", field=field, allowed=ALLOWED)
    return tuple(argv)


def approval_event(a: Approval) -> dict[str, Any]:
    return {"event": "approval_waiting", "approval_id": a.approval_id, "agent": a.agent.name,
            "agent_uuid": a.agent.uuid, "task": a.request_id, "kind": a.kind, "tool": a.tool, "summary": a.summary,
            "options": [o.kind for o in a.options], "deadline_at": a.deadline_at, "created_at": a.created_at}


def task_event(e: TaskEnd) -> dict[str, Any]:
    return {"event": "task_ended", "task": e.request_id, "agent": e.agent.name, "agent_uuid": e.agent.uuid,
            "status": e.status.value, "record": e.record_id, "ended_at": e.ended_at}
