"""The approval record: one agent's permission request, who may answer it, and how it ended
(docs/guide/approvals.md). Stdlib only, like `wardian.model`, which it extends.

Lifecycle: `pending` until exactly one of: a person or the lead answers (`allowed` / `denied`), the policy decides at
once (`deny`: `denied`), the deadline passes (`expired`, the policy's default decision, a denial, applied), or the
provider can no longer take an answer (`withdrawn`: its turn ended, its process died, the app restarted). An ended
approval never changes again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# The reason's bound lives with the limits, which the MCP server's tool table reads without loading wardian.model.
from wardian.limits import MAX_REASON_CHARS as MAX_REASON_CHARS
from wardian.model import Party, PermissionOption

ID_PREFIX = "apr_"
DEFAULT_TIMEOUT_MS = 10 * 60_000
"""How long a pending approval waits for its answer unless the agent's start says otherwise."""
MIN_TIMEOUT_MS = 1000
"""The shortest deadline an agent's start takes (`--approval-timeout 1`): a person cannot answer in less."""
MAX_TIMEOUT_MS = 7 * 24 * 3_600_000
MAX_SUMMARY_CHARS = 2000
MAX_DETAIL_CHARS = 8000
"""An approval's detail (JSON) longer than this is cut: it is the agent's words, shown to a person, not a payload."""


class Policy(StrEnum):
    """Who answers an agent's permission requests (`wardian agent start --approvals`)."""

    DENY = "deny"
    """Nobody: each is denied at once (and recorded)."""
    PERSON = "person"
    """A person: `wardian approval allow|deny`, or the console."""
    LEAD = "lead"
    """The agent that sent the task being worked on (a person's task: a person)."""


POLICIES = tuple(p.value for p in Policy)


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    ALLOWED = "allowed"
    DENIED = "denied"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"


@dataclass(frozen=True, slots=True)
class Approval:
    """One permission request an agent made, as the store keeps it."""

    approval_id: str
    """`apr_…`."""
    agent: Party
    request_id: str | None
    """The task (`ask_…`) whose turn asked, when the turn was on one."""
    turn_id: str | None
    kind: str
    """`command`, `file_change`, `tool` or `other`."""
    tool: str | None
    summary: str
    detail: dict[str, Any]
    options: tuple[PermissionOption, ...]
    policy: Policy
    answerer: Party | None
    """The lead agent that may answer it; None: a person."""
    deadline_at: int | None
    status: ApprovalStatus
    decided_by: str | None
    """Who ended it: `person`, the lead's name, `rule` (an allow rule; the reason names it), `policy`, `deadline`,
    `provider` (withdrawn), `restart`."""
    always: bool
    reason: str | None
    created_at: int
    ended_at: int | None


@dataclass(frozen=True, slots=True)
class ApprovalTally:
    """An agent's approvals: how many, how many are pending, and the newest."""

    count: int
    pending: int
    last: Approval
