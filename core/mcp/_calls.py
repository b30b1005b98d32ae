"""One tool call: arguments -> app params (plus the caller's session) -> one app exchange -> result or error.

Blocking by design (it uses the synchronous `AppClient`); the server runs it in a worker thread, with a
fresh client per call because a client is not thread-safe. A call is sent at most once: a lost answer is
reported as `DeliveryUncertain` and never replayed (seed, "Tool contract").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from wardian import errors
from wardian.client import AppClient
from wardian.home import ENV_HOME, ENV_SESSION, resolve_home
from wardian.protocol.app import parse_params
from wardian.protocol.tools import ToolSpec

# Arguments the server supplies itself; a caller that passes one is told it is not an argument.
_RESERVED = ("session",)


def call_tool(spec: ToolSpec, arguments: Mapping[str, Any] | None, environ: Mapping[str, str]) -> dict[str, Any]:
    """Run `spec` for the managed caller of `environ` and return the app's result.

    Raises:
        MissingSession: WARDIAN_SESSION_ID is unset or empty.
        AppNotRunning: WARDIAN_HOME is unset, or no app runs for it (nothing was sent).
        DeliveryUncertain: the request left but its answer was lost; do not resend.
        WardianError: the argument's or the app's own error.
    """
    args = dict(arguments or {})
    for name in _RESERVED:
        if name in args:
            raise errors.InvalidArguments(
                f"unknown argument {name!r}: the caller is the managed agent of this MCP server's "
                f"{ENV_SESSION}", field=name)
    session = environ.get(ENV_SESSION, "")
    if not session:
        raise errors.MissingSession(
            f"no managed caller: set {ENV_SESSION} in this MCP server's environment (print one with "
            "`wardian agent env NAME`)", field="session")
    params = {**args, "session": session}
    valid = parse_params(spec.method, params)  # the app's own validators: the same error for the same mistake
    if not environ.get(ENV_HOME):
        raise errors.AppNotRunning(
            f"{ENV_HOME} is not set in this MCP server's environment: set it to the home of the running app "
            "(start the app with `wardian app start`)", field="home")
    home = resolve_home(environ[ENV_HOME])
    with AppClient(home) as client:
        if spec.wait_argument is None:
            result = client.call(spec.method, params)
        else:
            timeout = getattr(valid, spec.wait_argument)
            result = client.call_wait(spec.method, params, spec.wait_default_ms if timeout is None else timeout)
    if not isinstance(result, dict):
        raise errors.DeliveryUncertain(f"the app answered {spec.method} with a malformed result; do not resend "
                                       "automatically", method=spec.method)
    return result


def success_content(result: dict[str, Any]) -> str:
    """The text block of a successful result: the structured result as compact JSON."""
    return orjson.dumps(result).decode("utf-8")


def error_content(exc: errors.WardianError) -> tuple[str, dict[str, Any]]:
    """The text block and `structuredContent` of a tool error (reliability-matrix Part 2)."""
    data = exc.to_data()
    text = f"{exc.code}: {exc.message} (delivery: {data['delivery']})"
    if exc.allowed:
        text += f"; allowed: {exc.allowed}"
    return text, {"error": data}
