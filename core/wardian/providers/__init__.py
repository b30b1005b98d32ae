"""Provider adapters: how the app reaches each kind of agent, behind one boundary (`wardian.providers.base`).

`wardian.providers.registry.PROVIDERS` maps each provider name of `wardian.model.PROVIDERS` to its implementation;
the app picks one by an agent's provider and from then on reads only its `Capabilities`. Importing this package
loads no concrete provider, nor the boundary's stack (anyio): `PROVIDERS` here is resolved from the registry, and
the boundary's names from `wardian.providers.base`, on first use, so a command that only reads a provider's
capabilities (`wardian.providers.capabilities` and the provider's `compat`) stays light.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

__all__ = [
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


def __getattr__(name: str) -> Any:
    if name == "PROVIDERS":
        from wardian.providers.registry import PROVIDERS  # every provider's implementation: on first use (see above)

        return PROVIDERS
    if name in __all__:
        from wardian.providers import base  # the boundary's stack (anyio): on first use (see above)

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
