"""The Codex app-server messages the owner reads, typed (mirrored from Codex's v2 protocol, Codex's own names).

Only the fields wardian uses are declared; `extra="ignore"` lets a newer Codex add fields without breaking us,
and camelCase aliases match the wire (`threadId`, `expectedTurnId`). A message that lacks a field wardian needs
fails validation (`pydantic.ValidationError`), which the owner treats as a protocol fault of that exchange.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

_CODEX = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel, populate_by_name=True)


class _Message(BaseModel):
    model_config = _CODEX


_M = TypeVar("_M", bound=_Message)


class TurnError(_Message):
    message: str | None = None


class ThreadItem(_Message):
    """One item of a turn; wardian reads agent messages (`type: agentMessage`) and their phase."""

    type: str
    phase: str | None = None
    text: str | None = None


class Turn(_Message):
    id: str
    status: str | None = None  # inProgress | completed | interrupted | failed
    error: TurnError | None = None
    items: list[ThreadItem] = []


class ThreadStatus(_Message):
    type: str  # idle | active | notLoaded | systemError


class Thread(_Message):
    id: str
    ephemeral: bool | None = None
    thread_source: str | None = None
    status: ThreadStatus | None = None
    turns: list[Turn] = []


class ThreadStartResponse(_Message):
    thread: Thread


class ThreadResumeResponse(_Message):
    thread: Thread


class ThreadReadResponse(_Message):
    thread: Thread


class TurnStartResponse(_Message):
    turn: Turn


class TurnSteerResponse(_Message):
    turn_id: str | None = None


class ThreadStartedNotification(_Message):
    thread: Thread


class TurnStartedNotification(_Message):
    thread_id: str | None = None
    turn: Turn


class ItemCompletedNotification(_Message):
    thread_id: str | None = None
    turn_id: str | None = None
    item: ThreadItem


class TurnCompletedNotification(_Message):
    thread_id: str | None = None
    turn: Turn


def parse(model: type[_M], payload: Any) -> _M:
    """`payload` (a result or notification params) as `model`.

    Raises:
        pydantic.ValidationError: a field wardian needs is missing or of the wrong type.
    """
    return model.model_validate(payload if payload is not None else {})
