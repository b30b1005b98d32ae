"""The wire dialects the scripted model speaks, one module each behind `base.Dialect`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wardian_harness.scripted_model.dialects.base import Dialect, Wire
from wardian_harness.scripted_model.dialects.chat import ChatDialect
from wardian_harness.scripted_model.dialects.responses import ResponsesDialect

__all__ = ["DIALECTS", "Dialect", "Wire", "dialect_at", "dialect_of"]

DIALECTS: tuple[Dialect, ...] = (ChatDialect(), ResponsesDialect())
"""Every dialect served; the first whose `owns` holds reads a body (Chat Completions bodies carry `messages`)."""


def dialect_at(path: Sequence[str]) -> Dialect | None:
    """The dialect served at `path` (the parts after `/agents/<name>/`), or None."""
    return next((d for d in DIALECTS if tuple(path) == d.path), None)


def dialect_of(body: Mapping[str, Any]) -> Dialect:
    """The dialect a request body is written in."""
    return next(d for d in DIALECTS if d.owns(body))
