"""The approvals seam: where a provider's runtime hands an agent's permission request to the app, and the app's
answer comes back (docs/guide/approvals.md).

```
runtime (provider side)                               app (observer)
  native request ─> ApprovalAsk ─ emit(ApprovalAsked(ask, reply)) ─> records the approval (pending), routes it
  task of its own: await reply.wait()  <──── reply.answer(Decision) by a person, the lead, a rule, the deadline
  writes the native answer once; on None (withdrawn), or the turn/process ending first: deny/cancel if it still can,
  then reply.withdraw()
```

A runtime passes its ask through `redact` with its agent's credentials before it emits it.

Invariant: a reply is settled once: the first `answer` or `withdraw` wins, every later one returns False and changes
nothing, so an answer reaches the provider at most once and a withdrawn request is never answered. Both are plain
calls on the event loop's thread (no await between the check and the set), which is what makes the first one win.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import anyio

from wardian.model import PermissionOption

ApprovalKind = Literal["command", "file_change", "tool", "other"]
KINDS: tuple[ApprovalKind, ...] = ("command", "file_change", "tool", "other")


@dataclass(frozen=True, slots=True)
class ApprovalAsk:
    """What an agent asks permission for, in plain words, as its provider's request says it."""

    turn_id: str | None
    """The turn that asked (the app finds its task); None outside a turn."""
    kind: str
    """`command`, `file_change`, `tool` or `other` (`KINDS`)."""
    summary: str
    """One line a person reads: "run `git push` in /w/repo", "edit 2 files (+10 -3)"."""
    detail: Mapping[str, Any]
    """JSON-able facts: command, cwd, files, diff_summary, tool, input (trimmed by the provider)."""
    options: tuple[PermissionOption, ...]
    """What the provider offered (ACP's options; a provider without options offers the ones it can answer)."""
    tool: str | None = None
    """The tool's name as the agent calls it (`Bash`, `run_shell_command`, `shell`), for allow rules."""


@dataclass(frozen=True, slots=True)
class Decision:
    allow: bool
    always: bool = False
    """"Allow always", when the provider offers it (else the runtime allows once)."""
    reason: str | None = None
    """Told to the model on a deny, when the provider can carry it."""


class ApprovalReply:
    """One request's answer slot: the app answers or withdraws it once; the runtime awaits it."""

    __slots__ = ("_decision", "_settled", "_withdrawn")

    def __init__(self) -> None:
        self._settled = anyio.Event()
        self._decision: Decision | None = None
        self._withdrawn = False

    @property
    def open(self) -> bool:
        """Neither answered nor withdrawn yet."""
        return not self._settled.is_set()

    def answer(self, decision: Decision) -> bool:
        """Settle the request with `decision`. False: it was already answered or withdrawn (nothing changes)."""
        if self._settled.is_set():
            return False
        self._decision = decision
        self._settled.set()
        return True

    def withdraw(self) -> bool:
        """The provider can no longer take an answer (its turn ended, its process died). False: already settled."""
        if self._settled.is_set():
            return False
        self._withdrawn = True
        self._settled.set()
        return True

    @property
    def withdrawn(self) -> bool:
        return self._withdrawn

    async def wait(self) -> Decision | None:
        """The decision once settled; None when it was withdrawn."""
        await self._settled.wait()
        return self._decision


REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
"""A shorter value is not searched for: it would cut ordinary words out of what a person reads."""


def redact(ask: ApprovalAsk, secrets: Iterable[str]) -> ApprovalAsk:
    """`ask` with every occurrence of each secret (the agent's credentials) replaced by `REDACTED`, in its summary,
    its tool and every string of its detail: an approval is kept in the store and shown to people, so a command line the
    model wrote with a key in it must not carry the key there (docs/guide/approvals.md#secrets)."""
    cut = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
    if not cut:
        return ask

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            for secret in cut:
                value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, Mapping):
            return {clean(k): clean(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return value

    return replace(ask, summary=clean(ask.summary), detail=clean(dict(ask.detail)), tool=clean(ask.tool))


@dataclass(frozen=True, slots=True)
class ApprovalAsked:
    """A provider event (`wardian.providers.base.ProviderEvent`): the agent asks; the app answers through `reply`."""

    ask: ApprovalAsk
    reply: ApprovalReply
