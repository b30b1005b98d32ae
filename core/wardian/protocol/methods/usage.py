"""Token usage as the app answers it (docs/guide/teams.md#usage): a task's (`request/show`'s `task.usage`) and an
agent's totals (`agent/overview`'s `usage`). A usage nobody reported is None (unknown), never zeros."""

from __future__ import annotations

from pydantic import with_config
from typing_extensions import TypedDict

from wardian.protocol.methods.base import CLOSED
from wardian.usage import AgentUsage, TokenUsage


@with_config(CLOSED)
class TokenUsageResult(TypedDict):
    input: int
    """Every input token the model read, cached ones included."""
    output: int
    """Every token the model wrote, reasoning included."""
    cached: int | None
    """Of `input`, read from the provider's prompt cache; None when the provider does not say."""


@with_config(CLOSED)
class AgentUsageResult(TypedDict):
    turns: int
    """The agent's ended turns."""
    unknown_turns: int
    """Of those, the turns whose provider reported no usage (not counted in `tokens`)."""
    tokens: TokenUsageResult | None
    """The sum over the other turns; None when no turn reported usage."""


def token_usage_result(u: TokenUsage | None) -> TokenUsageResult | None:
    return None if u is None else {"input": u.input, "output": u.output, "cached": u.cached}


def agent_usage_result(u: AgentUsage | None) -> AgentUsageResult | None:
    return None if u is None else {"turns": u.turns, "unknown_turns": u.unknown_turns,
                                   "tokens": token_usage_result(u.tokens)}
