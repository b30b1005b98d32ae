"""One runtime's open approvals: how every provider asks the app through the seam (`wardian.providers.approvals`) and
waits for its answer, written once (docs/guide/approvals.md).

A runtime calls `await asks.ask(ApprovalAsk(...))` in the task that answers its provider's native request (never in
its reader loop): the ask is emitted as `ApprovalAsked`, and the call returns the app's `Decision`, or None when the
approval was withdrawn. A runtime whose reader sees the request may split the call: `asks.open(...)` in the reader
emits at once (the app records the request a loop turn sooner than a task started for it would emit it), and
`await asks.decision(...)` in the task it starts waits for the answer. The runtime then writes its provider's native
answer once. Withdrawn means nobody will answer: the app withdrew it, the turn that asked ended (`turn_ended`), the
runtime ended (`end`), or the waiting task was cancelled (its provider's process or connection went away). On None
the runtime refuses the request if its provider can still take an answer, so a request is never allowed unless
someone allowed it.

Invariants: every reply handed to the app is settled by the time `ask` or `decision` returns (answered by the app, or
withdrawn here), or by `end`, so the app never holds an open reply whose provider request is gone; every ask is
redacted of the agent's credentials before the app sees it (`approvals.redact`: a command the model wrote with a key
in it is kept and shown).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from wardian.overrides import credential_name
from wardian.providers.approvals import ApprovalAsk, ApprovalAsked, ApprovalReply, Decision, redact
from wardian.providers.base import ProviderEvent

POLICIES = ("person", "lead", "deny")
"""Who answers an agent's approvals (`agent start --approvals`): a person, the lead that sent the task, or nobody (the
app denies each at once, and records it)."""


RULES_ONLY = "rules"
"""What the launcher gives a provider for an agent under `deny` with allow rules of its own: its requests are asked
all the same, so that a rule may allow one (the app denies the rest, as under `deny`)."""


def launch_policy(policy: str, has_rules: bool) -> str:
    """What a provider is told for an agent under `policy`: `RULES_ONLY` for `deny` with allow rules, else `policy`."""
    return RULES_ONLY if policy == "deny" and has_rules else policy


def policy_asks(policy: str) -> bool:
    """Whether an agent under `policy` should run with its provider's own approval step turned on: someone or a rule
    may allow a request (`person`, `lead`, `rules`), so the provider must ask instead of refusing (or running) by
    itself."""
    return policy in ("person", "lead", RULES_ONLY)


def secrets_of(env: Mapping[str, str], *more: str | None) -> tuple[str, ...]:
    """The agent's credential values an approval must never carry: the values of its process's credential variables
    (`*_API_KEY`, `*_TOKEN`, ...) and `more` (a sign-in handed over another way)."""
    return (*(v for k, v in env.items() if credential_name(k)), *(s for s in more if s))


@dataclass(frozen=True, slots=True, eq=False)
class Asked:
    """One request handed to the app (`OpenAsks.open`): the turn that asked, its answer slot, the provider's key."""

    turn_id: str | None
    reply: ApprovalReply
    key: str | None


class OpenAsks:
    """The approvals one runtime asked and has not had answered (module docstring). `emit` is the runtime's
    `TurnState.emit`; `secrets` the agent's credential values (`secrets_of`)."""

    def __init__(self, emit: Callable[[ProviderEvent], None], secrets: Iterable[str] = ()) -> None:
        self._emit = emit
        self._secrets = tuple(secrets)
        self._open: list[Asked] = []
        self._keyed: dict[str, ApprovalReply] = {}
        self._ended = False

    async def ask(self, ask: ApprovalAsk, *, key: str | None = None) -> Decision | None:
        """Hand `ask` to the app and wait for its decision; None once withdrawn (module docstring). `key` is the
        provider's own id of the request, for a provider that may take a request back (`cancelled`)."""
        return await self.decision(self.open(ask, key=key))

    def open(self, ask: ApprovalAsk, *, key: str | None = None) -> Asked | None:
        """Hand `ask` to the app now, without waiting: for a runtime's reader, so that the app sees the request
        before the task that waits for its answer (`decision`) has even started. None: the runtime has ended (never
        asked). The caller must pass what this returns to `decision`, or the reply stays open until `end`."""
        if self._ended:
            return None
        asked = Asked(ask.turn_id, ApprovalReply(), key)
        self._open.append(asked)
        if key is not None:
            self._keyed[key] = asked.reply
        self._emit(ApprovalAsked(redact(ask, self._secrets), asked.reply))
        return asked

    async def decision(self, asked: Asked | None) -> Decision | None:
        """The app's decision on a request `open` handed over; None once withdrawn (or never asked)."""
        if asked is None:
            return None
        try:
            return await asked.reply.wait()
        finally:
            asked.reply.withdraw()  # cancelled (the provider went away): the app's pending approval ends as withdrawn
            self._open.remove(asked)
            if asked.key is not None:
                self._keyed.pop(asked.key, None)

    def cancelled(self, key: str) -> bool:
        """The provider took its request `key` back: withdrawn. False: no such open request."""
        reply = self._keyed.get(key)
        return reply is not None and reply.withdraw()

    def turn_ended(self, turn_id: str | None) -> None:
        """The turn `turn_id` ended: its requests can no longer be answered."""
        for asked in list(self._open):
            if asked.turn_id == turn_id:
                asked.reply.withdraw()

    def end(self) -> None:
        """The runtime ended: every open request is withdrawn, and any later one is never asked."""
        self._ended = True
        for asked in list(self._open):
            asked.reply.withdraw()

    @property
    def count(self) -> int:
        """How many requests wait for an answer."""
        return len(self._open)
