"""One wardian turn of a Pi agent: the run a `prompt` starts (`agent_start` ... `agent_end`), and what its end means
(https://github.com/badlogic/pi-mono/blob/main/packages/coding-agent/docs/rpc.md).
Steered tasks and information join the run. A steered task belongs to the run in which Pi shows its user message
(`message_start`, role user, the task's exact text): Pi reads its steering queue only between model requests, so a
steer that arrives after the run's last look is kept for Pi's next run, and only that run's end may answer it.

The run's outcome is how its last assistant message stopped (`agent_end` carries the run's messages):

| last assistant message's `stopReason`  | outcome                                               |
| -------------------------------------- | ----------------------------------------------------- |
| `stop`                                 | done, with that message's text                        |
| `aborted`                              | interrupted                                           |
| `error`                                | failed, with Pi's `errorMessage`                      |
| `length`, any other, or no message     | failed, naming the reason                             |

Auto-retry: after a run that failed on a retryable error Pi may start the run again (`auto_retry_start` right after
its `agent_end`). Wardian turns it off in the agent's settings; an agent whose `-c retry.enabled=true` turns it back
on has a failed `agent_end` waited out: the runtime asks Pi something, and only if no `auto_retry_start` came before
the answer is the failure the turn's end (`hold`, `retrying`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from wardian import usage
from wardian.providers.base import OutcomeStatus, TurnOutcome
from wardian.usage import TokenUsage, total

_CREDENTIALS_REFUSED = ("401", "unauthorized", "invalid api key", "incorrect api key", "authentication")


def last_assistant(messages: Any) -> dict[str, Any] | None:
    """The last assistant message of a run's messages, if any."""
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return message
    return None


def message_text(message: dict[str, Any]) -> str:
    """The text parts of a message's content, joined (tool calls and thinking left out)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text")


def run_usage(messages: Any) -> TokenUsage | None:
    """The tokens of a run: the sum of its assistant messages' `usage` (None when none reported any). Pi counts
    `input` without the cache's reads and writes (`cacheRead`, `cacheWrite`): wardian's input adds them back."""
    found: list[TokenUsage | None] = []
    for message in messages if isinstance(messages, list) else []:
        raw = message.get("usage") if isinstance(message, dict) and message.get("role") == "assistant" else None
        if not isinstance(raw, dict):
            continue
        fresh, output = usage.count(raw.get("input")), usage.count(raw.get("output"))
        read, written = usage.count(raw.get("cacheRead")) or 0, usage.count(raw.get("cacheWrite")) or 0
        found.append(None if fresh is None or output is None else TokenUsage(fresh + read + written, output, read))
    return total(found)


def outcome_of(turn_id: str, message: dict[str, Any] | None) -> TurnOutcome:
    """The outcome a run ending on `message` (its last assistant message) has (module docstring)."""
    reason = str(message.get("stopReason") or "") if message is not None else ""
    if message is None:
        return TurnOutcome(turn_id, OutcomeStatus.FAILED, error="the run ended without an answer from the model")
    if reason == "stop":
        text = message_text(message)
        return TurnOutcome(turn_id, OutcomeStatus.DONE, final_text=text if text.strip() else None)
    why = str(message.get("errorMessage") or "")[:2000]
    if reason == "aborted":
        return TurnOutcome(turn_id, OutcomeStatus.INTERRUPTED, error=why or "aborted")
    if reason == "error":
        refused = any(marker in why.lower() for marker in _CREDENTIALS_REFUSED)
        return TurnOutcome(turn_id, OutcomeStatus.FAILED, error=why or "the model request failed",
                           credentials_rejected=refused)
    if reason == "length":
        return TurnOutcome(turn_id, OutcomeStatus.FAILED, error="the model's answer reached its token limit (length)")
    return TurnOutcome(turn_id, OutcomeStatus.FAILED, error=f"the run ended with stop reason {reason or 'none'}")


@dataclass
class Turn:
    """The run wardian's `prompt` started, under the id wardian chose for it."""

    turn_id: str
    retry: bool = False
    """The agent's settings leave Pi's auto-retry on: a failed `agent_end` is waited out (module docstring)."""
    cancelling: bool = False
    active: bool = False
    """Reported active (after Pi acknowledged its prompt)."""
    outcome: TurnOutcome | None = None
    """Set by the run's end when it came before the turn was reported active."""
    held: TurnOutcome | None = None
    """A failed run's outcome, held until it is known that no retry follows."""
    probes: int = 0
    """Bumped by every `agent_end` held and every `auto_retry_start`: a probe's answer settles only if unchanged."""
    steered: dict[str, str] = field(default_factory=dict[str, str])
    """Tasks steered in and not shown yet: their message text -> the turn id the app bound them to."""
    shown: list[str] = field(default_factory=list[str])
    """The turn ids of steered tasks this run showed the model: its end answers them too."""
    tokens: TokenUsage | None = None
    """The tokens of its runs so far (a retried run's included)."""

    def show(self, message: dict[str, Any]) -> None:
        """A user message Pi is giving the model (`message_start`): a steered task in it is now this run's."""
        turn_id = self.steered.pop(message_text(message), None)
        if turn_id is not None and turn_id != self.turn_id:
            self.shown.append(turn_id)

    def ended(self, event: dict[str, Any]) -> TurnOutcome | None:
        """An `agent_end`: the turn's outcome, or None when it is held for a retry that may follow."""
        self.tokens = total([self.tokens, run_usage(event.get("messages"))])
        outcome = replace(outcome_of(self.turn_id, last_assistant(event.get("messages"))), usage=self.tokens)
        if self.retry and not self.cancelling and outcome.status is OutcomeStatus.FAILED:
            self.held = outcome
            self.probes += 1
            return None
        return outcome

    def retrying(self) -> None:
        """An `auto_retry_start`: the held failure is not the end; the next `agent_end` is."""
        self.held = None
        self.probes += 1

    def retries_over(self, event: dict[str, Any]) -> TurnOutcome | None:
        """An `auto_retry_end`: a last failure is the turn's end."""
        if event.get("success") is True:
            return None
        held = self.held
        error = str(event.get("finalError") or (held.error if held else "") or "the model request failed")[:2000]
        return TurnOutcome(self.turn_id, OutcomeStatus.FAILED, error=error,
                           credentials_rejected=bool(held and held.credentials_rejected), usage=self.tokens)
