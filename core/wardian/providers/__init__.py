"""Provider adapters: how the app reaches each kind of agent, behind one boundary (`wardian.providers.base`).

`PROVIDERS` maps each provider name of `wardian.model.PROVIDERS` to its implementation; the app picks one by an
agent's provider and from then on reads only its `Capabilities`.
"""

from wardian.providers.base import (
    Capabilities,
    LaunchSpec,
    OutcomeStatus,
    Provider,
    ProviderEvent,
    ProviderInfo,
    ProviderRuntime,
    Started,
    StateChange,
    TaskDelivery,
    TurnOutcome,
)
from wardian.providers.registry import PROVIDERS

__all__ = [
    "PROVIDERS",
    "Capabilities",
    "LaunchSpec",
    "OutcomeStatus",
    "Provider",
    "ProviderEvent",
    "ProviderInfo",
    "ProviderRuntime",
    "Started",
    "StateChange",
    "TaskDelivery",
    "TurnOutcome",
]
