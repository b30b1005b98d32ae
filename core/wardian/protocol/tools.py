"""The eight MCP tools of `wardian mcp serve`: names, model-facing descriptions, input schemas, annotations.

Everything here is constant data (no I/O, no `mcp` import), so `tools/list` costs nothing and a test can
check every schema statically (docs/reliability.md, row M8). Each tool maps onto one app method; its arguments
are that method's params without `session`, which the server adds from `WARDIAN_SESSION_ID`. Bounds refer
to the limits in `wardian.model`; the app's `parse_params` enforces the same limits at run time.

Invariants:
- Every `inputSchema` is `{"type": "object", "additionalProperties": false}` with bounded fields.
- A schema admits exactly what the tool accepts, no more: an optional argument may also be `null`, meaning its
  default, and a required one may not; a cursor is never empty. The property test
  (`tests/reliability/test_validators.py`) checks every accepted argument object against the schema here.
- No property names a sender or a session: the app attributes everything to the caller's session (rule TOOL-3 of
  docs/design/contract.md).
- Descriptions are constants: no peer-controlled text ever reaches `tools/list` (no tool poisoning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wardian import errors
from wardian.durations import MAX_DEADLINE_MS, MIN_DEADLINE_MS
from wardian.limits import (
    DEFAULT_RECEIVE_LIMIT,
    DEFAULT_WAIT_MS,
    MAX_CURSOR_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_REASON_CHARS,
    MAX_RECEIVE_LIMIT,
    MAX_REQUEST_FRAME_BYTES,
    MAX_REQUEST_ID_CHARS,
    MAX_TARGET_CHARS,
    MAX_WAIT_MS,
)

# The largest stdio line the MCP server reads. A message of MAX_MESSAGE_BYTES whose every character
# needs a \uXXXX escape is 6 x 64 KiB = 384 KiB of JSON, well inside this cap.
MAX_MCP_FRAME_BYTES = MAX_REQUEST_FRAME_BYTES
# Deeper JSON than this is refused as a parse error before any model sees it (deep nesting used to crash the SDK's
# parser and leave the request unanswered: https://github.com/modelcontextprotocol/python-sdk/issues/2751).
MAX_MCP_JSON_DEPTH = 64

SERVER_NAME = "wardian"
SERVER_INSTRUCTIONS = (
    "Wardian lets you exchange information and work with peer coding agents. Use list_agents to find peers, "
    "send_message for information (no work, no reply expected), followup_task to assign work (you get a "
    "request_id; the peer answers with reply). To collect what others send you: wait_agent, then "
    "receive_messages, handle the records, then receive_messages with ack_cursor to acknowledge them. "
    "Complete a task assigned to you with reply and its request_id. If a result says delivery "
    "\"uncertain\", do not resend it automatically."
)

_TARGET: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_TARGET_CHARS,
    "description": "The exact name or UUID of one peer agent (see list_agents). Broadcasts, lists and your "
                   "own name are refused.",
}
_MESSAGE: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    # A string of at most MAX_MESSAGE_BYTES UTF-8 bytes has at most that many characters; the byte limit
    # itself is stated in the description and enforced by the app.
    "maxLength": MAX_MESSAGE_BYTES,
    "description": f"The text, kept exactly (Unicode, line breaks, punctuation); at most {MAX_MESSAGE_BYTES} "
                   "UTF-8 bytes.",
}
_TIMEOUT_WAIT: dict[str, Any] = {
    "type": ["integer", "null"],
    "minimum": 0,
    "maximum": MAX_WAIT_MS,
    "default": DEFAULT_WAIT_MS,
    "description": f"How long to wait in milliseconds, 0..{MAX_WAIT_MS} (default {DEFAULT_WAIT_MS}, also for "
                   "null); 0 checks once and returns at once.",
}
_TIMEOUT_RECEIVE: dict[str, Any] = {
    "type": ["integer", "null"],
    "minimum": 0,
    "maximum": MAX_WAIT_MS,
    "default": 0,
    "description": f"If no record is pending, wait up to this many milliseconds for one, 0..{MAX_WAIT_MS} "
                   "(default 0, also for null: return at once).",
}
_DEADLINE: dict[str, Any] = {
    "type": ["integer", "null"],
    "minimum": MIN_DEADLINE_MS,
    "maximum": MAX_DEADLINE_MS,
    "description": f"Optional: milliseconds from now, {MIN_DEADLINE_MS}..{MAX_DEADLINE_MS} (1 second to 7 days), "
                   "by which the task must be answered; then wardian ends it as failed (deadline_exceeded), "
                   "interrupting the peer's turn that works on it. null or omitted: the team's default deadline, "
                   "if any.",
}
_CURSOR_DESCRIPTIONS = {
    "cursor": "Continue reading after the batch this cursor (from an earlier receive_messages result) "
              "names, without acknowledging it.",
    "ack_cursor": "Acknowledge the batch this cursor (from an earlier receive_messages result) names, "
                  "once you have handled its records; acknowledged records are not returned again.",
}


def _cursor(name: str) -> dict[str, Any]:
    # null is "no cursor", as if omitted; "" is never a cursor (the MCP server refuses it as invalid_cursor).
    return {"type": ["string", "null"], "minLength": 1, "maxLength": MAX_CURSOR_CHARS,
            "description": _CURSOR_DESCRIPTIONS[name]}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": False}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One MCP tool and the app method it forwards to."""

    name: str
    method: str
    title: str
    description: str
    input_schema: dict[str, Any]
    # MCP tool annotations (hints for hosts). Codex runs a tool under approval_policy = "never" without an
    # operator grant only when it is read-only, or neither destructive nor open-world (docs/providers/codex.md).
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    # The argument that bounds how long the app may hold the call (its exchange gets that plus a grace).
    wait_argument: str | None = None
    wait_default_ms: int = 0

    def annotations(self) -> dict[str, Any]:
        return {"title": self.title, "readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent, "openWorldHint": self.open_world}

    def definition(self) -> dict[str, Any]:
        """The tool as `tools/list` shows it (MCP wire names)."""
        return {"name": self.name, "title": self.title, "description": self.description,
                "inputSchema": self.input_schema, "annotations": self.annotations()}


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="wait_agent",
        method="mailbox/wait",
        title="Wait for mailbox activity",
        description=(
            "Wait until your Wardian mailbox has unacknowledged activity (information, tasks or replies "
            "addressed to you), without reading, claiming or acknowledging anything. Returns at once if "
            f"activity is already waiting; otherwise waits up to timeout_ms (default and maximum {MAX_WAIT_MS}; "
            "0 checks immediately). The result carries no message body: call receive_messages next to read "
            "the records. An expired wait (timed_out: true) is a normal result and cancels nothing. Waiting "
            "never starts or interrupts any agent. If you and other agents wait for tasks that only you hold "
            "(each took a task of another and waits for its own), the wait ends at once with wake_reason "
            "\"deadlock\" and a deadlock object naming the agents and tasks: answer the tasks in its holding list "
            "with reply instead of waiting again."
        ),
        input_schema=_object({"timeout_ms": _TIMEOUT_WAIT}),
        read_only=True, destructive=False, idempotent=True, open_world=False,
        wait_argument="timeout_ms", wait_default_ms=DEFAULT_WAIT_MS,
    ),
    ToolSpec(
        name="send_message",
        method="message/send",
        title="Send information to a peer",
        description=(
            "Send information to one peer agent: facts, status, answers. It does not start or interrupt the "
            "peer's turn and creates no obligation to reply. To ask a peer to do work, use followup_task "
            "instead. The receipt names the interaction id, the resolved target and the delivery reached: "
            "\"admitted\" (stored for the peer) or \"provider_visible\" (already in the peer's live "
            "conversation). "
            "If an error says delivery \"uncertain\", the message may have arrived: do not resend it "
            "automatically."
        ),
        input_schema=_object({"target": _TARGET, "message": _MESSAGE}, ("target", "message")),
        read_only=False, destructive=False, idempotent=False, open_world=True,
    ),
    ToolSpec(
        name="followup_task",
        method="task/followup",
        title="Assign a task to a peer",
        description=(
            "Assign work to one peer agent. Returns at once with a receipt whose request_id (ask_...) "
            "identifies the task; it does not wait for the work. The peer completes the task with reply, "
            "and that reply reaches your mailbox as a record of kind \"reply\" with the same request_id: "
            "collect it with wait_agent, then receive_messages. Use send_message instead for information "
            "that needs no work. If an error says delivery \"uncertain\", the task may have been assigned: "
            "do not resend it automatically. With deadline_ms, the task fails (deadline_exceeded) if it is not "
            "answered in time, and you get that failure as its answer. A task you assign while you work on a task "
            "continues that task's chain; a chain too deep (task_depth_exceeded) or too long "
            "(chain_budget_exceeded) is refused: then finish your task yourself."
        ),
        input_schema=_object({"target": _TARGET, "message": _MESSAGE, "deadline_ms": _DEADLINE},
                             ("target", "message")),
        read_only=False, destructive=False, idempotent=False, open_world=True,
    ),
    ToolSpec(
        name="receive_messages",
        method="mailbox/receive",
        title="Receive mailbox records",
        description=(
            "Read a batch of records addressed to you, oldest first: information (kind \"information\"), "
            "tasks (kind \"task\", with a request_id; new_work is true the one time a task is handed to you "
            "as new work) and replies to tasks you assigned (kind \"reply\", with the task's request_id and "
            "a status). Each result has a cursor. After handling the records, call receive_messages again "
            "with ack_cursor set to that cursor to acknowledge them; pass cursor instead to read further "
            "without acknowledging. Replaying a cursor returns the same records and repeats no work. "
            f"limit is 1..{MAX_RECEIVE_LIMIT} records (default {DEFAULT_RECEIVE_LIMIT}). An empty result "
            "cancels nothing; later messages and replies stay available."
        ),
        input_schema=_object({
            "cursor": _cursor("cursor"),
            "ack_cursor": _cursor("ack_cursor"),
            "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_RECEIVE_LIMIT,
                      "default": DEFAULT_RECEIVE_LIMIT,
                      "description": f"The most records to return, 1..{MAX_RECEIVE_LIMIT} (default "
                                     f"{DEFAULT_RECEIVE_LIMIT}, also for null)."},
            "timeout_ms": _TIMEOUT_RECEIVE,
        }),
        # Acknowledging and claiming change durable state, so this is not read-only; both only add facts
        # inside the caller's own mailbox (nothing is deleted, nothing leaves Wardian).
        read_only=False, destructive=False, idempotent=False, open_world=False,
        wait_argument="timeout_ms", wait_default_ms=0,
    ),
    ToolSpec(
        name="reply",
        method="task/reply",
        title="Reply to an assigned task",
        description=(
            "Complete a task that was assigned to you: give its request_id (ask_..., from the task record), "
            "a status of done, blocked or failed, and the result as message. The reply goes to the agent "
            "that assigned the task; a task takes one reply. Only tasks have a request_id: informational "
            "messages need no reply."
        ),
        input_schema=_object({
            "request_id": {"type": "string", "minLength": 1, "maxLength": MAX_REQUEST_ID_CHARS,
                           "description": "The request_id (ask_...) of the task you are completing."},
            "status": {"type": "string", "enum": ["done", "blocked", "failed"],
                       "description": "done: finished; blocked: cannot proceed without help; failed: gave up."},
            "message": _MESSAGE,
        }, ("request_id", "status", "message")),
        read_only=False, destructive=False, idempotent=False, open_world=True,
    ),
    ToolSpec(
        name="interrupt_agent",
        method="agent/interrupt",
        title="Interrupt a peer's current turn",
        description=(
            "Request interruption of one peer agent's current turn; the peer keeps its session and "
            "conversation. It fails with not_active when the peer has no active turn. It does not send a "
            "correction, pause the agent or stop its process: to change what a peer does, send_message or "
            "followup_task after interrupting."
        ),
        input_schema=_object({"target": _TARGET}, ("target",)),
        # Interrupting abandons the peer's turn in progress: that work is lost.
        read_only=False, destructive=True, idempotent=False, open_world=True,
    ),
    ToolSpec(
        name="list_agents",
        method="agent/list",
        title="List peer agents",
        description=(
            "List the Wardian agents you can address: name, UUID, provider, host and status (off, starting, "
            "idle, active, errored, signed_out), and which of them is you (caller); deliveries counts, per agent UUID, "
            "tasks whose delivery is uncertain or was confirmed only by a lookup; hosts says which hosts are live "
            "(an agent on a host that is not live is offline: tasks for it wait). Use a name or UUID from here "
            "as target. Reading the list changes nothing."
        ),
        input_schema=_object({}),
        read_only=True, destructive=False, idempotent=True, open_world=False,
    ),
    ToolSpec(
        name="answer_approval",
        method="approval/answer",
        title="Answer a worker's approval",
        description=(
            "Answer a permission request (approval, apr_...) of an agent working on a task you assigned: Wardian "
            "sends you such a request as information from wardian, with what the agent asks to do and by when. "
            "decision \"allow\" lets the agent do it; \"deny\" refuses it, and reason (optional) tells the agent "
            "why. always (optional, with allow) also allows requests like it for the rest of the agent's session, "
            "when the agent offered that. Only the agent a request was sent to may answer it, and only once; an "
            "approval that already ended (answered by a person, expired, withdrawn) fails with approval_ended."
        ),
        input_schema=_object({
            "approval_id": {"type": "string", "minLength": 5, "maxLength": 64, "pattern": "^apr_[0-9A-Za-z]+$",
                            "description": "The approval's id (apr_...), from the request Wardian sent you."},
            "decision": {"type": "string", "enum": ["allow", "deny"],
                         "description": "allow: the agent may do what it asked; deny: it may not."},
            "reason": {"type": ["string", "null"], "minLength": 1, "maxLength": MAX_REASON_CHARS,
                       "description": "Optional, with deny: why, told to the agent where its provider can carry "
                                      "it; kept with the approval."},
            "always": {"type": ["boolean", "null"],
                       "description": "Optional, with allow: allow requests like this one for the rest of the "
                                      "agent's session, when its provider offered that (else: once)."},
        }, ("approval_id", "decision")),
        # Allowing lets another agent run what it asked, beyond Wardian: like send_message, it reaches out.
        read_only=False, destructive=False, idempotent=False, open_world=True,
    ),
)

TOOLS_BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}
TOOL_NAMES: tuple[str, ...] = tuple(TOOLS_BY_NAME)


def parse_tool_names(names: str | Sequence[str] | None) -> tuple[str, ...]:
    """The tools named for approval (`--approve-tools a,b` or a list), in the tool table's order, each once.

    The one reading of such a list, for `wardian agent start`, `wardian codex register` and the app's `agent/start`.

    Raises:
        InvalidArguments: an empty or unknown name (the error lists the eight tools).
    """
    if names is None:
        return ()
    listed = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    unknown = [n for n in listed if n not in TOOLS_BY_NAME]
    if unknown:
        shown = ", ".join(repr(n[:40]) for n in unknown[:5])
        raise errors.InvalidArguments(f"approve_tools names no wardian tool: {shown}", field="approve_tools",
                                      allowed=", ".join(TOOL_NAMES))
    return tuple(t for t in TOOL_NAMES if t in listed)
