"""Token usage: what a provider reported a turn's model requests cost, in one shape for every provider
(docs/guide/teams.md#usage). Stdlib only.

Every provider counts in its own words; wardian keeps three numbers, each meaning the same whoever reported it:
`input` is every input token the model read (cached ones included), `cached` the part of `input` read from the
provider's prompt cache (None when the provider does not say), `output` every token the model wrote (reasoning
included). A turn whose provider reported nothing has no usage: unknown, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """The tokens of one turn (or a sum of turns)."""

    input: int
    output: int
    cached: int | None = None
    """Of `input`, read from the prompt cache; None: the provider did not say."""

    def __add__(self, other: TokenUsage) -> TokenUsage:
        cached = None if self.cached is None or other.cached is None else self.cached + other.cached
        return TokenUsage(self.input + other.input, self.output + other.output, cached)


def total(usages: Iterable[TokenUsage | None]) -> TokenUsage | None:
    """The sum of the known usages; None when none is known (never a 0 made up for a turn that reported
    nothing)."""
    known = [u for u in usages if u is not None]
    if not known:
        return None
    result = known[0]
    for usage in known[1:]:
        result = result + usage
    return result


def count(value: object) -> int | None:
    """A provider's token count as an int (None: absent, or not a non-negative whole number)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != int(value):
        return None
    return int(value)


@dataclass(frozen=True, slots=True)
class AgentUsage:
    """One agent's turns as far as usage goes: how many ended, how many of those reported no usage, and the sum of
    those that did (None: none did)."""

    turns: int
    unknown_turns: int
    tokens: TokenUsage | None
