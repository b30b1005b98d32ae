"""Strict decoding of the stdio MCP stream, one newline-delimited JSON-RPC message per line (no `mcp` import).

The SDK's own stdio transport leaves some parse failures unanswered
(https://github.com/modelcontextprotocol/python-sdk/issues/2751) and replaces bad UTF-8; this layer sits in front of
it and answers every malformed line itself, so a host's request never hangs and the server keeps serving (reliability
row M2, docs/reliability.md).

Invariants:
- A line is one message of at most MAX_MCP_FRAME_BYTES; a longer line is discarded up to its newline and
  answered with INVALID_REQUEST, `data.code` `message_too_large`, and the request's id when the line's start shows
  it (a request's `jsonrpc` and `id` come before its params, as the official SDKs write them), so a host's call fails
  at once instead of waiting out its own timeout.
- Not JSON, invalid UTF-8, a byte order mark or NaN/Infinity -> PARSE_ERROR with `id: null`; nesting deeper than
  MAX_MCP_JSON_DEPTH -> PARSE_ERROR with the request's id (the line parsed, so its id is known).
- Valid JSON that is not one JSON-RPC 2.0 message (a batch array, no `"jsonrpc": "2.0"`, an id that is not
  a string or integer, a non-string method, params that are neither an object nor null: MCP's params are
  objects) -> INVALID_REQUEST, with the id when it can be recovered. A notification is answered too, with id
  null, as JSON-RPC 2.0 answers an invalid request whose id is unknown.
- Blank lines are ignored; a trailing CR (CRLF line endings) is JSON whitespace and accepted.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from wardian.protocol.jsonrpc import INVALID_REQUEST, PARSE_ERROR
from wardian.protocol.tools import MAX_MCP_FRAME_BYTES, MAX_MCP_JSON_DEPTH

JsonId = str | int


class FrameError(Exception):
    """A line that cannot be handed to the MCP session; `response()` is what the host gets instead."""

    def __init__(self, code: int, message: str, id_: JsonId | None = None,
                 data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = id_
        self.data = data

    def response(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": self.id, "error": error}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    # orjson refuses what the JSON grammar allows in one case: a lone surrogate escape ("\ud800"). Parse
    # such a line again with the standard library; the tool validators then refuse the text as
    # invalid_text (contract rule TXT-3) instead of the whole line being called unparseable.
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(PARSE_ERROR, f"Parse error: the line is not valid UTF-8 (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        raise FrameError(PARSE_ERROR, "Parse error: a byte order mark is not allowed")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:  # valid JSON past the parser's own depth: the id is still read from the line's start
        raise FrameError(PARSE_ERROR, f"Parse error: JSON nested deeper than {MAX_MCP_JSON_DEPTH} levels",
                         leading_id(line)) from None
    except ValueError as exc:
        raise FrameError(PARSE_ERROR, f"Parse error: {str(exc)[:120]}") from None


def _too_deep(value: Any) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_MCP_JSON_DEPTH:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return False


_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\r\n"
# How much of a line's start is read for its id: the members before it are `"jsonrpc":"2.0"` and perhaps a method.
_ID_WINDOW = 4096


def leading_id(line: bytes) -> JsonId | None:
    """The `id` of the JSON-RPC object `line` starts, read from its first members alone: None unless every member up
    to the id is a plain scalar (a line cut at the frame cap holds only its start, so nothing after the id is read).
    """
    text = line[:_ID_WINDOW].decode("utf-8", errors="replace")
    try:
        at = _skip(text, 0)
        if text[at] != "{":
            return None
        at += 1
        while True:
            key, at = _DECODER.raw_decode(text, _skip(text, at))
            at = _skip(text, at)
            if not isinstance(key, str) or text[at] != ":":
                return None
            at = _skip(text, at + 1)
            if text[at] in "{[":
                return None  # a nested value (params) before any id: not read
            value, at = _DECODER.raw_decode(text, at)
            if key == "id":
                return value if _valid_id(value) else None
            at = _skip(text, at)
            if text[at] != ",":
                return None
            at += 1
    except (ValueError, IndexError):
        return None


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def decode_line(line: bytes) -> dict[str, Any] | None:
    """One stdio line as a JSON-RPC message object, or None for a blank line.

    Raises:
        FrameError: the line is not one JSON-RPC 2.0 message; answer it with `FrameError.response()`.
    """
    if not line.strip():
        return None
    if len(line) > MAX_MCP_FRAME_BYTES:
        raise FrameError(INVALID_REQUEST, f"Invalid request: the line is longer than {MAX_MCP_FRAME_BYTES} bytes",
                         leading_id(line), {"code": "message_too_large", "limit_bytes": MAX_MCP_FRAME_BYTES})
    message = _parse(line)
    if _too_deep(message):
        raw_id = message.get("id") if isinstance(message, dict) else None
        raise FrameError(PARSE_ERROR, f"Parse error: JSON nested deeper than {MAX_MCP_JSON_DEPTH} levels",
                         raw_id if _valid_id(raw_id) else None)
    if isinstance(message, list):
        raise FrameError(INVALID_REQUEST, "Invalid request: JSON-RPC batches are not supported by MCP")
    if not isinstance(message, dict):
        raise FrameError(INVALID_REQUEST, "Invalid request: a message must be a JSON object")
    raw_id = message.get("id")
    id_ = raw_id if _valid_id(raw_id) else None
    if message.get("jsonrpc") != "2.0":
        raise FrameError(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"', id_)
    if "id" in message and not _valid_id(raw_id):
        raise FrameError(INVALID_REQUEST, "Invalid request: id must be a string or an integer")
    if "method" in message:
        if not isinstance(message["method"], str):
            raise FrameError(INVALID_REQUEST, "Invalid request: method must be a string", id_)
        if not isinstance(message.get("params"), dict | None):
            raise FrameError(INVALID_REQUEST, "Invalid request: params must be an object", id_)
    elif "id" not in message or ("result" not in message and "error" not in message):
        raise FrameError(INVALID_REQUEST, "Invalid request: neither a request, a notification nor a response",
                         id_)
    return message


def cancelled_request(message: dict[str, Any]) -> JsonId | None:
    """The request id a decoded `notifications/cancelled` names, or None if `message` is not one (MCP
    cancellation: `params.requestId`, a string or an integer, the id exactly as the request carried it)."""
    if "id" in message or message.get("method") != "notifications/cancelled":
        return None
    params = message.get("params")
    request_id = params.get("requestId") if isinstance(params, dict) else None
    return request_id if _valid_id(request_id) else None


def encode_message(message: dict[str, Any]) -> bytes:
    """One message as a stdio line (UTF-8 JSON, no embedded newline)."""
    return orjson.dumps(message) + b"\n"
