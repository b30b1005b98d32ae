"""What every method's params and results share: the field checks, the strict params bases, the parties.

Params are strict pydantic models (`extra="forbid"`, no coercion: `true` is not an int, `"10"` is not an int). Each
check below raises the one precise wardian error for its field, so the CLI, the MCP server and raw socket clients all
get the same answer for the same mistake; the MCP tool schemas are built from the same bounds, so they exist once.

Results are closed TypedDicts, not models: a receive page of 100 records costs ~25 µs as dicts and ~0.4-1.1 ms as
pydantic models, and pyright checks every builder's keys and types against its TypedDict. `extra` forbid makes
`validate_result` (the contract tests) refuse any key a builder adds that the type lacks.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from wardian import errors
from wardian.model import (
    MAX_AGENT_NAME_CHARS,
    MAX_CURSOR_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_RECEIVE_LIMIT,
    MAX_REQUEST_ID_CHARS,
    MAX_TARGET_CHARS,
    MAX_WAIT_MS,
    OPERATOR_NAME,
    OPERATOR_UUID,
    Agent,
    Interaction,
    Party,
)

# Names that address everyone; a target must name exactly one agent, since broadcasts fail.
BROADCAST_NAMES = frozenset({"*", "all", "@all", "everyone", "@everyone", "@here", "here", "broadcast"})
_WILDCARD_CHARS = re.compile(r"[*?\[\]{}]")
_LIST_SEPARATORS = re.compile(r"[\s,;|]+")
AGENT_NAME_RE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_AGENT_NAME_CHARS - 1}}}$")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_TARGET_ALLOWED = "one agent name (A-Z a-z 0-9 . _ -, starting with a letter or digit) or UUID"


# --- field checks (each raises the precise wardian error) -------------------------------------------------


def _names_one(value: str) -> bool:
    return bool(AGENT_NAME_RE.match(value) or _UUID_RE.match(value))


def _addresses_many(value: str) -> bool:
    """Whether `value` asks for more than one agent: a broadcast name, a wildcard, or a list of names or UUIDs. Text
    that merely cannot be a name (`worker' OR '1'='1`) is not a broadcast: it is an invalid target."""
    if value.lower() in BROADCAST_NAMES or _WILDCARD_CHARS.search(value):
        return True
    parts = [p for p in _LIST_SEPARATORS.split(value) if p]
    return len(parts) > 1 and all(_names_one(p) or p.lower() in BROADCAST_NAMES for p in parts)


def check_target(value: str) -> str:
    if not value.strip():
        raise errors.InvalidTarget("target is empty; give one agent's exact name or UUID", field="target",
                                   allowed="one agent name or UUID")
    if len(value) > MAX_TARGET_CHARS:
        raise errors.InvalidTarget(f"target is longer than {MAX_TARGET_CHARS} characters", field="target",
                                   allowed=f"1..{MAX_TARGET_CHARS} characters")
    if not value.isascii() and _has_lone_surrogate(value):
        raise errors.InvalidText("target contains a lone surrogate, which is not valid Unicode text", field="target",
                                 allowed=_TARGET_ALLOWED)
    if _addresses_many(value.strip()):
        raise errors.BroadcastNotAllowed(
            "target addresses more than one agent; broadcasts and lists are not allowed, address exactly "
            "one agent by name or UUID", field="target", allowed="one agent name or UUID")
    if value != value.strip():
        raise errors.InvalidTarget("target has leading or trailing whitespace", field="target",
                                   allowed="one agent name or UUID")
    if not _names_one(value):
        raise errors.InvalidTarget(f"target {value[:80]!r} is neither an agent name nor a UUID", field="target",
                                   allowed=_TARGET_ALLOWED)
    return value


def _has_lone_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_text(value: str, field: str = "message") -> str:
    if not value.strip():
        raise errors.EmptyMessage(f"{field} is empty or only whitespace; write the text to send",
                                  field=field, allowed=f"1..{MAX_MESSAGE_BYTES} UTF-8 bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise errors.InvalidText(f"{field} contains a lone surrogate, which is not valid Unicode text",
                                 field=field, allowed="valid Unicode text without NUL") from None
    if size > MAX_MESSAGE_BYTES:
        raise errors.MessageTooLarge(
            f"{field} is {size} UTF-8 bytes; the limit is {MAX_MESSAGE_BYTES}", field=field,
            allowed=f"1..{MAX_MESSAGE_BYTES} UTF-8 bytes", limit_bytes=MAX_MESSAGE_BYTES, size_bytes=size)
    if "\x00" in value:
        # Our choice: NUL has no meaning in peer prose and truncates C strings and terminals downstream, so it is
        # refused rather than stored.
        raise errors.InvalidText(f"{field} contains a NUL character (U+0000), which is not allowed",
                                 field=field, allowed="valid Unicode text without NUL")
    return value


def check_cursor(value: str | None, field: str) -> str | None:
    if value == "":  # a cursor is never empty (the tool schema's minLength 1): refused here, not by the store
        raise errors.InvalidCursor(f"{field} is empty; pass a cursor from an earlier receive result, or omit it",
                                   field=field, allowed="a cursor returned by an earlier receive")
    return value


def check_agent_name(value: str) -> str:
    if (not AGENT_NAME_RE.match(value) or value.lower() in BROADCAST_NAMES or _UUID_RE.match(value)
            or value.lower() in ("wardian", OPERATOR_NAME)):
        raise errors.InvalidAgentName(
            f"agent name {value[:80]!r} is not allowed", field="name",
            allowed=f"1..{MAX_AGENT_NAME_CHARS} characters of A-Z a-z 0-9 . _ -, starting with a letter or "
            "digit; not a UUID and not all/everyone/wardian/operator")
    return value


# --- params bases and field types --------------------------------------------------------------------------

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)

Session = Annotated[str, Field(min_length=1, max_length=256)]
TargetField = Annotated[str, Field(description="Exact agent name or UUID.")]
MessageField = Annotated[str, Field(description="Text, kept exactly.")]
LimitField = Annotated[int, Field(ge=1, le=MAX_RECEIVE_LIMIT)]
TimeoutField = Annotated[int, Field(ge=0, le=MAX_WAIT_MS)]
CursorField = Annotated[str, Field(max_length=MAX_CURSOR_CHARS)]
AgentField = Annotated[str, Field(min_length=1, max_length=MAX_TARGET_CHARS)]
RecordIdField = Annotated[str, Field(min_length=1, max_length=MAX_REQUEST_ID_CHARS)]


class Params(BaseModel):
    """The base of every method's params: strict, closed and frozen."""

    model_config = _STRICT


class SessionParams(Params):
    """Params of a method that acts for the caller its session token names."""

    session: Session


class EmptyParams(Params):
    pass


# --- results shared by several resources ---------------------------------------------------------------------

CLOSED = ConfigDict(extra="forbid")

RecordKind = Literal["information", "task", "reply", "notice"]
ReplyStatusName = Literal["done", "blocked", "failed"]
# How far a send or reply got: stored for the recipient, or already in its live conversation.
Delivery = Literal["admitted", "provider_visible"]
# Who wrote a record: an agent, the operator (the person running the agents), or Wardian itself (notices).
SenderKind = Literal["agent", "operator", "wardian"]


@with_config(CLOSED)
class PartyResult(TypedDict):
    name: str
    uuid: str


def party_result(p: Party | Agent) -> PartyResult:
    return {"name": p.name, "uuid": p.uuid}


def sender_kind(p: Party | None) -> SenderKind:
    return "wardian" if p is None else "operator" if p.uuid == OPERATOR_UUID else "agent"


@with_config(CLOSED)
class InteractionResult(TypedDict):
    """What every view of one record shows of the record itself; each view's result adds its own facts."""

    id: str
    kind: RecordKind
    sender: PartyResult | None
    sender_kind: SenderKind
    recipient: PartyResult
    text: str
    created_at: int
    request_id: str | None
    status: ReplyStatusName | None


def interaction_result(i: Interaction) -> InteractionResult:
    return {"id": i.id, "kind": i.kind.value, "sender": party_result(i.sender) if i.sender else None,
            "sender_kind": sender_kind(i.sender), "recipient": party_result(i.recipient),
            "text": i.text, "created_at": i.created_at, "request_id": i.request_id,
            "status": i.status.value if i.status else None}


@with_config(CLOSED)
class OkResult(TypedDict):
    ok: bool
