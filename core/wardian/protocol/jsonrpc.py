"""JSON-RPC 2.0 envelope constants and the mapping between wardian errors and error objects.

Code bands: -32700..-32600 are the spec's own. Wardian allocates -32000..-32099 by what the caller may
do next (the branches of `wardian.errors`), one number per branch; the precise, stable error is the
string `data.code`, which round-trips to its exception class through `wardian.errors.from_data`.
"""

from __future__ import annotations

from wardian import errors

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PARSE_ERROR = -32700
"""The frame is not JSON (or not UTF-8)."""
INVALID_REQUEST = -32600
"""Valid JSON that is not a JSON-RPC request object, or a frame over the size cap."""
METHOD_NOT_FOUND = -32601
"""No such method."""
INVALID_PARAMS = -32602
"""Params are not an object."""
INTERNAL_ERROR = -32603
"""An unexpected failure inside the app."""

REQUEST_ERROR = -32001
"""The caller's input was wrong (`errors.RequestError`); nothing changed."""
REJECTED = -32002
"""Definitely not admitted (`errors.Rejected`)."""
DELIVERY_UNCERTAIN = -32003
"""The outcome is unknown (`errors.DeliveryUncertain`): never replay."""
TRANSPORT_ERROR = -32004
"""The app read nothing of the request (`errors.TransportError`, e.g. `app_busy`): certainly no effect."""
STORAGE_ERROR = -32005
"""The store refused the change (`errors.StorageError`); nothing was admitted."""
HOME_ERROR = -32006
"""The home cannot serve the request (`errors.HomeError`)."""
PROVIDER_ERROR = -32007
"""The provider answered with an error (`errors.ProviderError`)."""

_BRANCHES: tuple[tuple[type[errors.WardianError], int], ...] = (
    (errors.RequestError, REQUEST_ERROR),
    (errors.Rejected, REJECTED),
    (errors.DeliveryUncertain, DELIVERY_UNCERTAIN),
    (errors.TransportError, TRANSPORT_ERROR),
    (errors.StorageError, STORAGE_ERROR),
    (errors.HomeError, HOME_ERROR),
    (errors.ProviderError, PROVIDER_ERROR),
)


def rpc_code_for(exc: errors.WardianError) -> int:
    for cls, code in _BRANCHES:
        if isinstance(exc, cls):
            return code
    return INTERNAL_ERROR


def error_object(exc: errors.WardianError) -> dict[str, Any]:
    return {"code": rpc_code_for(exc), "message": exc.message, "data": exc.to_data()}


def error_from_object(obj: Any) -> errors.WardianError:
    """Rebuild the exception an app error object stands for."""
    if isinstance(obj, dict):
        # A JSON object: its keys are strings (typing.cast would load typing on the CLI's path).
        error: dict[str, Any] = obj  # pyright: ignore[reportUnknownVariableType]
        data = error.get("data")
        if isinstance(data, dict):
            fields: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
            if isinstance(fields.get("code"), str):
                return errors.from_data(fields)
        return errors.InternalError(f"app error {error.get('code')}: {error.get('message')}")
    return errors.InternalError(f"malformed app error: {obj!r}")
