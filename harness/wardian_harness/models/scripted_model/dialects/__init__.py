"""The wire dialects the scripted model speaks, one module each behind `base.Dialect`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wardian_harness.models.scripted_model.dialects.base import Dialect, Wire
from wardian_harness.models.scripted_model.dialects.chat import ChatDialect
from wardian_harness.models.scripted_model.dialects.gemini import GeminiDialect
from wardian_harness.models.scripted_model.dialects.messages import MessagesDialect
from wardian_harness.models.scripted_model.dialects.responses import ResponsesDialect

__all__ = ["DIALECTS", "Dialect", "Wire", "dialect_at", "dialect_of"]

DIALECTS: tuple[Dialect, ...] = (MessagesDialect(), ChatDialect(), GeminiDialect(), ResponsesDialect())
"""Every dialect served; the first whose `owns` holds reads a body (Messages and Chat Completions bodies both carry
`messages`: Messages, the stricter test, goes first; Responses, which owns any other body, goes last)."""


def dialect_at(path: Sequence[str]) -> Dialect | None:
    """The dialect served at `path` (the parts after `/agents/<name>/`), or None."""
    return next((d for d in DIALECTS if d.serves(path)), None)


def dialect_of(body: Mapping[str, Any], path: str | None = None) -> Dialect:
    """The dialect a request body is written in (the one served at its request `path`, when given)."""
    if path is not None:
        parts = path.split("?", 1)[0].strip("/").split("/")
        served = dialect_at(parts[2:]) if len(parts) > 2 and parts[0] == "agents" else None
        if served is not None:
            return served
    return next(d for d in DIALECTS if d.owns(body))
