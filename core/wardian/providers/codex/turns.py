"""What a Codex turn ended with, read from its notifications: the completed agent messages of the turn, its final
answer, and the `TurnOutcome` the app is given; and the one reader of Codex's answers.

A steer cancels the in-flight model stream, so an agentMessage can start and never complete: only completed items
count. Commentary is never a final answer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from wardian import errors, usage
from wardian.providers.base import OutcomeStatus, TurnOutcome
from wardian.providers.codex import messages as m
from wardian.usage import TokenUsage

_OUTCOMES = {"completed": OutcomeStatus.DONE, "interrupted": OutcomeStatus.INTERRUPTED,
             "failed": OutcomeStatus.FAILED}
_R = TypeVar("_R", bound=pydantic.BaseModel)


@dataclass
class TurnItems:
    """The completed agent messages of one turn, by phase."""

    final: list[str] = field(default_factory=list)
    unknown_phase: list[str] = field(default_factory=list)

    def add(self, item: m.ThreadItem) -> None:
        if item.phase == "final_answer":
            self.final.append(item.text or "")
        elif item.phase is None:
            self.unknown_phase.append(item.text or "")


def final_text_of(items: TurnItems, summary: Sequence[m.ThreadItem]) -> str | None:
    """The turn's final answer: the last `final_answer` item, else the last completed item with an unknown
    phase; commentary never."""
    if items.final:
        return items.final[-1]
    if items.unknown_phase:
        return items.unknown_phase[-1]
    for item in reversed(summary):
        if item.type == "agentMessage" and item.phase != "commentary":
            return item.text or ""
    return None


def turn_outcome(turn: m.Turn, items: TurnItems, usage: TokenUsage | None = None) -> TurnOutcome:
    """The outcome of a completed turn: its status, for a done turn its final answer, and its token usage."""
    status = _OUTCOMES.get(turn.status or "", OutcomeStatus.UNKNOWN)
    return TurnOutcome(
        turn_id=turn.id, status=status,
        final_text=final_text_of(items, turn.items) if status is OutcomeStatus.DONE else None,
        error=turn.error.message if turn.error is not None and turn.error.message else None, usage=usage)


def request_usage(params: dict[str, Any]) -> tuple[str, TokenUsage] | None:
    """A `thread/tokenUsage/updated` notification's turn and the usage of the model request it reports (its `last`
    breakdown: `total` is the whole thread's). Codex counts like the Responses API: `inputTokens` includes
    `cachedInputTokens`, `outputTokens` includes `reasoningOutputTokens`."""
    last = (params.get("tokenUsage") or {}).get("last")
    turn_id = params.get("turnId")
    if not isinstance(last, dict) or not isinstance(turn_id, str):
        return None
    counts = [usage.count(last.get(k)) for k in ("inputTokens", "outputTokens")]
    if counts[0] is None or counts[1] is None:
        return None
    return turn_id, TokenUsage(counts[0], counts[1], usage.count(last.get("cachedInputTokens")))


class TurnBook:
    """The conversation's turns from their start to their end: each one's completed items, and the turns already
    seen to end (a `turn/start` answer read after its turn's own turn/completed, for a turn that ends at once, must
    not mark a finished turn active again)."""

    def __init__(self) -> None:
        self._items: dict[str, TurnItems] = {}
        self._usage: dict[str, TokenUsage] = {}
        self._ended: deque[str] = deque(maxlen=64)

    def started(self, turn_id: str) -> None:
        self._items.setdefault(turn_id, TurnItems())

    def completed_item(self, turn_id: str, item: m.ThreadItem) -> None:
        self._items.setdefault(turn_id, TurnItems()).add(item)

    def used(self, params: dict[str, Any]) -> None:
        """A `thread/tokenUsage/updated`: one more model request of its turn, added to the turn's usage."""
        found = request_usage(params)
        if found is not None and found[0] not in self._ended:
            turn_id, last = found
            self._usage[turn_id] = self._usage[turn_id] + last if turn_id in self._usage else last

    def has_ended(self, turn_id: str) -> bool:
        return turn_id in self._ended

    def ended(self, turn: m.Turn) -> TurnOutcome:
        """The turn ended: its outcome (and its items forgotten)."""
        self._ended.append(turn.id)
        return turn_outcome(turn, self._items.pop(turn.id, TurnItems()), self._usage.pop(turn.id, None))


def read_result(model: type[_R], payload: Any, method: str) -> _R:
    """A Codex answer as `model`; one that lacks what wardian needs leaves the exchange's outcome unknown."""
    try:
        return model.model_validate(payload if payload is not None else {})
    except pydantic.ValidationError as exc:
        raise errors.DeliveryUncertain(f"Codex answered {method} with a result wardian cannot read "
                                       f"({exc.error_count()} problems); its outcome is unknown",
                                       method=method) from None
