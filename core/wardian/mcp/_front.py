"""The discovery answers of `wardian mcp serve` from constant data, without importing the MCP SDK (no `mcp` import).

Importing the SDK costs over a second here (`mcp_startup`, docs/benchmarks.md), but a host's first requests,
`initialize`, `notifications/initialized`, `tools/list` and `ping`, need nothing of it: their answers are functions
of the negotiated protocol version and the constant tool table (`wardian.protocol.tools`). `Front` answers them
while the SDK server starts in the background, and hands everything else to it: the hot path must not pay for what
it does not use (docs/decisions/0007-mcp-front-and-quick-path.md).

Invariants:
- A constant answer is exactly what the SDK's low-level server answers for the same request: the same
  version negotiation, capabilities, serverInfo, instructions and tools. `tests/mcp/test_mcp_front.py` checks
  this against the SDK's own serialization for every handshake version, and the server compares the SDK's
  answer to the replayed `initialize` with the constant one at run time (`replay_matches`).
- Only the handshake era is served here: `initialize` is answered only as the connection's opening request,
  with params whose shape the SDK certainly accepts; any doubt (an unknown shape, `_meta`, an id orjson cannot
  write back) hands the request to the SDK instead. A connection whose opening request is anything else is
  the SDK's alone.
- The SDK learns the handshake it did not see: the opening `initialize` is replayed to it first, under a
  private id whose answer is never written (`REPLAY_ID_PREFIX`), so its connection state (negotiated version,
  client params) is what it would have been.
- `ping` and `tools/list` are answered here only after a constant `initialize` and only while no request
  handed to the SDK is unanswered (a request the host cancelled no longer counts: it gets no answer), so a
  constant answer never overtakes the SDK's answer to an earlier request and nothing is answered twice.
- A plain `tools/call` of any of the eight tools (`QUICK_TOOLS`), waits included, is routed to the server's quick
  path (`Route.quick`): the same result code as the SDK's handler, written in the SDK's form, without the SDK's
  per-call machinery and without waiting for the SDK's import. Like the SDK's own concurrent handlers, its answer
  may overtake a wait still running. Anything else about a `tools/call` (an unknown tool, odd params or `_meta`,
  no constant handshake) goes to the SDK.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from wardian import __version__
from wardian.protocol.tools import SERVER_INSTRUCTIONS, SERVER_NAME, TOOLS, TOOLS_BY_NAME, ToolSpec

# The protocol versions the SDK (mcp 2.3.0, `mcp_types.version`) negotiates through the `initialize` handshake,
# oldest first; a client asking for another gets the latest. A test pins these to the SDK's own tuple.
HANDSHAKE_PROTOCOL_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]

# The ids of replayed `initialize` requests start with this; their answers go to no one.
REPLAY_ID_PREFIX = "wardian-replay-initialize-"

_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_FAST_METHODS = frozenset({"ping", "tools/list"})
# The tools a `tools/call` of is served on the quick path: all of them. The server runs the waits among them
# (`QuickCall.waits`) on threads of their own and honours `notifications/cancelled` for every quick call.
QUICK_TOOLS = frozenset(tool.name for tool in TOOLS)
_CALL_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})


def initialize_result(protocol_version: str) -> dict[str, Any]:
    """The `initialize` result the SDK's low-level server gives for a negotiated `protocol_version`."""
    return {
        "protocolVersion": protocol_version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
        "instructions": SERVER_INSTRUCTIONS,
    }


def tools_list_result(protocol_version: str) -> dict[str, Any]:
    """The `tools/list` result for `protocol_version` (the same for every handshake version, a test checks)."""
    return {"tools": [tool.definition() for tool in TOOLS]}


def negotiate(requested: str) -> str:
    """The SDK's choice: the client's version when the SDK speaks it through the handshake, else the latest."""
    return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


# --- the initialize params the SDK certainly accepts ------------------------------------------------------
# A shape is a dict of known keys -> the shape of each value; unknown keys are ignored by the SDK's models
# (`extra="ignore"`) and so by this check. `_OBJ` is any JSON object, `_OBJ_OF_OBJ` an object of objects.

_OBJ = "object"
_OBJ_OF_OBJ = "object of objects"
_BOOL = "boolean"
_STR = "string"
_Shape = str | Mapping[str, Any]

_CAPABILITIES: Mapping[str, _Shape] = {
    "experimental": _OBJ_OF_OBJ,
    "extensions": _OBJ_OF_OBJ,
    "sampling": {"context": _OBJ, "tools": _OBJ},
    "elicitation": {"form": _OBJ, "url": _OBJ},
    "roots": {"listChanged": _BOOL},
    "tasks": {"list": _OBJ, "cancel": _OBJ,
              "requests": {"sampling": {"createMessage": _OBJ}, "elicitation": {"create": _OBJ}}},
}
_CLIENT_INFO_OPTIONAL = ("title", "description", "websiteUrl")


def _fits(value: Any, shape: _Shape) -> bool:
    if value is None:
        return True  # every field checked here is optional
    if shape == _BOOL:
        return isinstance(value, bool)
    if not isinstance(value, dict):
        return False
    if shape == _OBJ:
        return True
    if shape == _OBJ_OF_OBJ:
        return all(isinstance(v, dict) for v in value.values())
    assert isinstance(shape, Mapping)
    return all(_fits(value.get(key), sub) for key, sub in shape.items())


def certain_protocol_version(params: Any) -> str | None:
    """The version the SDK would negotiate for these `initialize` params, or None unless it certainly accepts them.

    Conservative by design: a None hands the request to the SDK, which then answers (or refuses) it itself.
    """
    if not isinstance(params, dict) or "_meta" in params:
        return None
    requested, capabilities, info = params.get("protocolVersion"), params.get("capabilities"), params.get("clientInfo")
    if not isinstance(requested, str) or not isinstance(capabilities, dict) or not isinstance(info, dict):
        return None
    if not _fits(capabilities, _CAPABILITIES):
        return None
    if not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
        return None
    if info.get("icons") is not None or not all(isinstance(info.get(k), str | None) for k in _CLIENT_INFO_OPTIONAL):
        return None
    return negotiate(requested)


def _encode_id(id_: Any) -> bytes | None:
    try:
        return orjson.dumps(id_)
    except orjson.JSONEncodeError:  # e.g. an integer id beyond 64 bits: the SDK writes that one back itself
        return None


def _response(encoded_id: bytes, result: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + encoded_id + b',"result":' + result + b"}\n"


def _answer(id_: Any, result: bytes) -> bytes | None:
    encoded_id = _encode_id(id_)
    return None if encoded_id is None else _response(encoded_id, result)


@dataclass(frozen=True, slots=True)
class QuickCall:
    """A `tools/call` of a quick tool, to be run by the server itself and answered with `answer`."""

    id: str | int
    encoded_id: bytes
    spec: ToolSpec
    arguments: dict[str, Any] | None

    @property
    def waits(self) -> bool:
        """Whether the call may block for its `timeout_ms` (`wait_agent`, `receive_messages`)."""
        return self.spec.wait_argument is not None

    def answer(self, result: dict[str, Any]) -> bytes:
        return _response(self.encoded_id, orjson.dumps(result))


@dataclass(frozen=True, slots=True)
class Route:
    """What to do with one message: write `answer` to the host, hand `forward` to the SDK, or run `quick`."""

    answer: bytes | None = None
    forward: dict[str, Any] | None = None
    quick: QuickCall | None = None


class Front:
    """The per-connection state of the constant answers (see the module docstring); used by the stdin thread only."""

    def __init__(self, *, quick: bool = True) -> None:
        self._opened = False
        self._quick = quick  # False: every tools/call goes to the SDK (WARDIAN_MCP_QUICK_PATH=0)
        self.protocol_version: str | None = None  # set once `initialize` was answered here
        self._results: dict[str, bytes] = {}
        self.initialize_answer: dict[str, Any] | None = None
        self.replay_id = REPLAY_ID_PREFIX + secrets.token_hex(8)

    def route(self, message: dict[str, Any], sdk_busy: bool) -> Route:
        """Route one decoded JSON-RPC message; `sdk_busy` says a request handed to the SDK is still unanswered."""
        is_request = "id" in message and "method" in message
        if not is_request:
            return Route(forward=message)
        if not self._opened:
            self._opened = True
            return self._open(message)
        if message["method"] == "tools/call":
            quick = self._quick_call(message)
            return Route(quick=quick) if quick is not None else Route(forward=message)
        if (self.protocol_version is None or sdk_busy or message["method"] not in _FAST_METHODS
                or message.keys() - _ENVELOPE_KEYS or message.get("params", {}) != {}):
            return Route(forward=message)
        method = message["method"]
        if method not in self._results:
            result = {} if method == "ping" else tools_list_result(self.protocol_version)
            self._results[method] = orjson.dumps(result)
        answer = _answer(message["id"], self._results[method])
        return Route(answer=answer) if answer is not None else Route(forward=message)

    def _quick_call(self, message: dict[str, Any]) -> QuickCall | None:
        """The quick form of a `tools/call`, or None when the SDK must serve it.

        Quick: after a constant `initialize`, a request of one of the eight tools, whose arguments are an object
        or absent and whose `_meta`, if any, the SDK accepts (an object; a progress token a string or an integer).
        `_meta` changes nothing in the answer: no tool reports progress, on either path (Codex 0.171.0 sends a
        `progressToken` and its turn metadata with every call). Its result is built by the same code as the SDK
        handler's (`_calls.tool_outcome`) and written in the SDK's own form (`_calls.call_tool_result`); a test
        compares the two paths call by call. The SDK's per-call machinery (its message models, a second thread,
        a worker-thread hop for the blocking app exchange) cost ~1.5 ms of CPU per call here, more than the
        app's durable send (docs/benchmarks.md); and a first wait served by the SDK waited for its import.
        """
        params = message.get("params")
        if (not self._quick or self.protocol_version is None or message.keys() - _ENVELOPE_KEYS
                or not isinstance(params, dict) or params.keys() - _CALL_PARAM_KEYS
                or params.get("name") not in QUICK_TOOLS):
            return None
        meta = params.get("_meta")
        if meta is not None:
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if not isinstance(meta, dict) or not (token is None or isinstance(token, str)
                                                  or (isinstance(token, int) and not isinstance(token, bool))):
                return None
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            return None
        encoded_id = _encode_id(message["id"])
        if encoded_id is None:
            return None
        return QuickCall(message["id"], encoded_id, TOOLS_BY_NAME[params["name"]], arguments)

    def _open(self, message: dict[str, Any]) -> Route:
        if message["method"] != "initialize" or message.keys() - _ENVELOPE_KEYS:
            return Route(forward=message)
        version = certain_protocol_version(message.get("params"))
        if version is None:
            return Route(forward=message)
        result = initialize_result(version)
        answer = _answer(message["id"], orjson.dumps(result))
        if answer is None:
            return Route(forward=message)
        self.protocol_version = version
        self.initialize_answer = result
        return Route(answer=answer, forward={**message, "id": self.replay_id})

    def replay_matches(self, sdk_result: Any) -> bool:
        """Whether the SDK's answer to the replayed `initialize` is the constant one that was written."""
        return sdk_result == self.initialize_answer
