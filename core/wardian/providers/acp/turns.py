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

Usage, where the agent offers it (docs/guide/teams.md#usage): the answer's `usage` (ACP's draft `PromptResponse.usage`:
`inputTokens` with the cached ones, `cachedReadTokens`, `outputTokens`); else Gemini CLI's
`_meta.quota.token_count` (`input_tokens`, `output_tokens`: no cache figure); else the sum of the `_meta.usage` that
Qwen Code puts on an `agent_message_chunk` after each model request (the same names as ACP's). None of them: unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wardian import usage
from wardian.providers.base import OutcomeStatus, TurnOutcome
from wardian.usage import TokenUsage, total

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
    reported: TokenUsage | None = None
    """The sum of the per-request usages its chunks carried (Qwen Code)."""

    def update(self, update: dict[str, Any]) -> None:
        """Take one `session/update`'s `update`."""
        kind = update.get("sessionUpdate")
        meta = update.get("_meta")
        if kind == "agent_message_chunk" and isinstance(meta, dict) and isinstance(meta.get("usage"), dict):
            self.reported = total([self.reported, _acp_usage(meta["usage"])])
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
        tokens = self.usage(result)
        if reason == "end_turn":
            return TurnOutcome(self.turn_id, OutcomeStatus.DONE, final_text=self.final_text, usage=tokens)
        if reason == "cancelled":
            return TurnOutcome(self.turn_id, OutcomeStatus.INTERRUPTED, error="cancelled", usage=tokens)
        why = _REASONS.get(reason, f"the turn ended with stop reason {reason or 'none'}")
        return TurnOutcome(self.turn_id, OutcomeStatus.FAILED, error=f"{why} ({reason})", usage=tokens)

    def usage(self, result: dict[str, Any]) -> TokenUsage | None:
        """The turn's tokens, from the answer or the chunks (module docstring)."""
        if isinstance(result.get("usage"), dict):
            return _acp_usage(result["usage"])
        meta = result.get("_meta")
        quota = meta.get("quota") if isinstance(meta, dict) else None
        counts = quota.get("token_count") if isinstance(quota, dict) else None
        if isinstance(counts, dict):
            fresh, output = usage.count(counts.get("input_tokens")), usage.count(counts.get("output_tokens"))
            if fresh is not None and output is not None:
                return TokenUsage(fresh, output)
        return self.reported

    def refused(self, message: str) -> TurnOutcome:
        """The outcome of a prompt the agent answered with a JSON-RPC error (after a cancel: interrupted)."""
        if self.cancelling:
            return TurnOutcome(self.turn_id, OutcomeStatus.INTERRUPTED, error=message[:2000], usage=self.reported)
        refused = any(marker in message.lower() for marker in _CREDENTIALS_REFUSED)
        return TurnOutcome(self.turn_id, OutcomeStatus.FAILED, error=message[:2000], credentials_rejected=refused,
                           usage=self.reported)


def _acp_usage(raw: dict[str, Any]) -> TokenUsage | None:
    """ACP's usage shape (`inputTokens` counts the cached ones, `cachedReadTokens` among them)."""
    fresh, output = usage.count(raw.get("inputTokens")), usage.count(raw.get("outputTokens"))
    if fresh is None or output is None:
        return None
    return TokenUsage(fresh, output, usage.count(raw.get("cachedReadTokens")))
