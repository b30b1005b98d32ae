"""One ACP turn as the agent shows it: the `session/update` notifications of a `session/prompt`, and what its answer
means (https://agentclientprotocol.com/protocol/prompt-turn).

The turn's final text is what the agent said after its last tool call (`agent_message_chunk`s, joined): the text
before a tool call is commentary the turn went on from. The prompt's answer ends the turn:

| answer                                             | outcome                                   |
| -------------------------------------------------- | ----------------------------------------- |
| `stopReason: end_turn`                             | done, with the final text                 |
| `stopReason: cancelled`                            | interrupted                               |
| `stopReason: max_tokens`, `max_turn_requests`, `refusal`, any other | failed, naming the reason |
| a JSON-RPC error                                   | failed, with the agent's message          |
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wardian.providers.base import OutcomeStatus, TurnOutcome

_CREDENTIALS_REFUSED = ("401", "unauthorized", "invalid api key", "incorrect api key", "authentication")
_REASONS = {"max_tokens": "the agent reached its token limit", "max_turn_requests":
            "the agent reached its limit of model requests in one turn", "refusal": "the model refused"}


@dataclass
class Turn:
    """The turn wardian's `session/prompt` started, under the id wardian chose for it."""

    turn_id: str
    segments: list[str] = field(default_factory=lambda: [""])
    cancelling: bool = False
    active: bool = False
    """Reported active (after its prompt's line left)."""
    outcome: TurnOutcome | None = None
    """Set by the prompt's answer."""

    def update(self, update: dict[str, Any]) -> None:
        """Take one `session/update`'s `update`."""
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text":
                self.segments[-1] += str(content.get("text") or "")
        elif kind in ("tool_call", "tool_call_update") and self.segments[-1]:
            self.segments.append("")

    @property
    def final_text(self) -> str | None:
        text = self.segments[-1].strip()
        return self.segments[-1] if text else None

    def ended(self, result: dict[str, Any]) -> TurnOutcome:
        """The outcome the prompt's result gives."""
        reason = str(result.get("stopReason") or "")
        if reason == "end_turn":
            return TurnOutcome(self.turn_id, OutcomeStatus.DONE, final_text=self.final_text)
        if reason == "cancelled":
            return TurnOutcome(self.turn_id, OutcomeStatus.INTERRUPTED, error="cancelled")
        why = _REASONS.get(reason, f"the turn ended with stop reason {reason or 'none'}")
        return TurnOutcome(self.turn_id, OutcomeStatus.FAILED, error=f"{why} ({reason})")

    def refused(self, message: str) -> TurnOutcome:
        """The outcome of a prompt the agent answered with a JSON-RPC error (after a cancel: interrupted)."""
        if self.cancelling:
            return TurnOutcome(self.turn_id, OutcomeStatus.INTERRUPTED, error=message[:2000])
        refused = any(marker in message.lower() for marker in _CREDENTIALS_REFUSED)
        return TurnOutcome(self.turn_id, OutcomeStatus.FAILED, error=message[:2000], credentials_rejected=refused)
