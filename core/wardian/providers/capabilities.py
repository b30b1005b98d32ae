"""What a provider's runtime may be asked to do (`Capabilities`), apart from the boundary in `wardian.providers.base`.

Each provider's version gates (its `compat` module) answer with these facts, and commands that only read them
(`wardian init` choosing what the team file shows) import this module and the gates alone: neither the runtime's
stack (anyio) nor the credential model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the app may ask of a provider runtime (docs/design/architecture.md#data-flow: the runtime reads these, never
    names)."""

    steer: bool
    """A task can join the active turn, fenced by that turn's id; without it a task waits for the turn to end."""
    inject: bool
    """Information and replies can be pushed into the conversation without starting a turn."""
    interrupt: bool
    """The exact active turn can be interrupted."""
    exact_completion: bool
    """The end of the exact turn a task started is observed with its final text, so the app publishes the reply;
    without it the recipient must reply explicitly (contract rule RPL-5)."""
    attach: bool = False
    """A person's terminal UI can attach to the app-owned runtime (`wardian agent attach`)."""
    no_attach_reason: str | None = None
    """Why a provider without `attach` has no attached mode, told to whoever asks for it (None: it just has none)."""
    inject_while_active: bool = True
    """A push may land while a turn runs (it joins the model's next request). Without it a push waits for the turn
    to end: until then the record stays on the receive path, and is pushed at idle only if no receive took it."""
    push_at_boundary: bool = False
    """Records join only a running turn, at its next tool boundary (the runtime is an `OffersAtBoundary`): they stay
    on the receive path, and while a turn runs each is offered to it; at the boundary the runtime takes it for the
    push (`mailbox.claim_push`) unless a receive took it first, so the agent sees it once, by one path."""
    inject_while_idle: bool = True
    """A push may land while no turn runs. Without it (a provider that would only hold it in memory until its next
    turn) information for an idle agent stays on the receive path, durable, and is pushed just before the agent's next
    turn starts, ahead of that turn's task, if no receive took it first."""
    tool_grants: bool = False
    """`--approve-tools` grants mean something: the provider asks a person before any wardian tool not granted. A
    provider without an approval step refuses grants rather than ignore them."""
