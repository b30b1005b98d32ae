"""What the provider approval tests share (tests/providers/*/test_approvals.py): a scripted agent's world with its
workspace and the shell command that needs permission, the next event of a runtime, a task."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc

from tests.conftest import AppHandle
from wardian.app.runtime.approvals import EXPIRED
from wardian.model import Party
from wardian.providers.base import ProviderEvent, TaskDelivery
from wardian_harness.models.scripted_model import AgentScript, ToolCall


class Runtime(Protocol):
    @property
    def events(self) -> anyio.abc.ObjectReceiveStream[ProviderEvent]: ...


@dataclass
class World:
    root: Path
    script: AgentScript

    @property
    def workspace(self) -> Path:
        return self.root / "ws"

    def touch(self, description: str | None = None) -> ToolCall:
        """A `bash` call making the file `made` in the workspace (a command each provider asks permission for)."""
        arguments = {"command": f"touch {self.workspace / 'made'}"}
        if description is not None:
            arguments["description"] = description
        return ToolCall("bash", arguments, namespace=None)


async def next_event(runtime: Runtime, kind: type[ProviderEvent]) -> ProviderEvent:
    """The runtime's next event of `kind`, the others passed over (bounded)."""
    with anyio.fail_after(60):
        async for event in runtime.events:
            if isinstance(event, kind):
                return event
    raise AssertionError(f"the runtime ended before a {kind.__name__}")


def task(request_id: str, text: str = "make a file") -> TaskDelivery:
    return TaskDelivery(request_id, Party("lead", "u-lead"), text)


def the_expired_approval(app: AppHandle, agent: str, request_id: str) -> dict[str, Any]:
    """`agent`'s one approval, checked ended `expired` by the deadline while it worked on `request_id`, the policy's
    default (a denial) given (docs/guide/approvals.md#how-an-approval-ends)."""
    (ended,) = [a for a in app.call("approval/list", {"pending": False})["approvals"] if a["agent"]["name"] == agent]
    assert (ended["request_id"], ended["kind"], ended["status"], ended["decided_by"], ended["reason"]) == (
        request_id, "command", "expired", "deadline", EXPIRED)
    return dict(ended)
