"""What the app holds of one started agent: its provider runtime, the generation it runs in, and the per-runtime
state its dispatcher, observer and push queue share."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import anyio.abc

from wardian.providers import Capabilities, ProviderRuntime
from wardian.providers.base import ProviderInfo


@dataclass
class AgentHandle:
    """One started agent's runtime. `kick` wakes its dispatcher; `scope` holds the runtime and its two helper tasks
    (cancelling it takes all three down); `done` is set once the runtime's end has been persisted."""

    agent_id: int
    uuid: str
    name: str
    generation: int
    runtime: ProviderRuntime
    info: ProviderInfo
    kick: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    lost: list[str] = field(default_factory=list)  # request ids made uncertain when this runtime ended
    gone: dict[str, int] = field(default_factory=dict)  # request id -> how often its conversation was gone
    # Records admitted while a turn ran, for a provider that cannot push then: pushed at idle unless received.
    deferred: list[str] = field(default_factory=list)
    background: anyio.abc.TaskGroup | None = None
    """The task group of its runtime, observer and dispatcher, once running: where a push that waits for the
    turn's next tool boundary runs (`Capabilities.push_at_boundary`)."""

    @property
    def caps(self) -> Capabilities:
        return self.info.capabilities


Owners = dict[str, AgentHandle]
"""The runtimes this app runs, by agent uuid: one dict, shared by every part of the runtime."""
