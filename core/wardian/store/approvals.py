"""Approvals (docs/guide/approvals.md): the permission requests agents made, who may answer each, and how each ended;
and each agent's approval policy and deadline, kept with it like its `-c` settings.

Invariants:
- An approval is written `pending` once and ended once: every end is a conditional UPDATE from `pending`, checked
  by its rowcount, so of two answers racing exactly one ends it and the other learns it had already ended.
- An ended approval never changes again; its end is committed before the provider is told (the app's order).
- A request is recorded by one operation (`ask`): what routes it (the agent's policy and rules, the turn's task, its
  lead) is read in the transaction that inserts it, so the app pays one writer call and one commit for it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from wardian import errors
from wardian.approval_rules import matching_rule
from wardian.approvals import (
    DEFAULT_TIMEOUT_MS,
    ID_PREFIX,
    MAX_DETAIL_CHARS,
    MAX_REASON_CHARS,
    MAX_SUMMARY_CHARS,
    Approval,
    ApprovalStatus,
    ApprovalTally,
    Policy,
)
from wardian.model import InteractionKind, Party, PermissionOption, now_ms
from wardian.store import ledger
from wardian.store._sql import new_public_id, of_this_host, party_by_id, party_of_id
from wardian.store.api import Pushable
from wardian.store.engine import Store
from wardian.store.mailbox import INSERT_INTERACTION, PUSH_SENDING

_COLS = ("public_id, agent_id, request_id, turn_id, kind, tool, summary, detail, options, policy, answerer_id, "
         "deadline_at, status, decided_by, always, reason, created_at, ended_at")


def policy_of(store: Store, agent_id: int) -> tuple[Policy, int]:
    """The agent's approval policy and deadline (ms), defaults filled in."""
    row = store.db.execute("SELECT approvals, approval_timeout_ms FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return Policy(row[0] or Policy.DENY), int(row[1] or DEFAULT_TIMEOUT_MS)


def asking_of(store: Store, agent_id: int) -> tuple[Policy, int, tuple[str, ...]]:
    """The agent's approval policy, deadline (ms) and allow rules, defaults filled in: what routes a request."""
    return _asking(store, agent_id)[:3]


def _asking(store: Store, agent_id: int) -> tuple[Policy, int, tuple[str, ...], Party]:
    """`asking_of` and the agent as a party, in one statement."""
    row = store.db.execute("SELECT approvals, approval_timeout_ms, allow_rules, name, uuid FROM agents WHERE id = ?",
                           (agent_id,)).fetchone()
    return (Policy(row[0] or Policy.DENY), int(row[1] or DEFAULT_TIMEOUT_MS), tuple(json.loads(row[2] or "[]")),
            Party(row[3], row[4]))


def set_policy(store: Store, agent_id: int, policy: str | None, timeout_ms: int | None,
               allow: Sequence[str] | None = None) -> None:
    """Keep the agent's policy, deadline and allow rules; None leaves the saved one as it is."""
    with store.atomic():
        if allow is not None:
            store.db.write("UPDATE agents SET allow_rules = ? WHERE id = ?", (json.dumps(list(allow)), agent_id))
        if policy is not None:
            store.db.write("UPDATE agents SET approvals = ? WHERE id = ?", (policy, agent_id))
        if timeout_ms is not None:
            store.db.write("UPDATE agents SET approval_timeout_ms = ? WHERE id = ?", (timeout_ms, agent_id))


def lead_of(store: Store, request_id: str) -> int | None:
    """The agent that sent the task `request_id`; None when a person (the operator) sent it."""
    row = store.db.execute(
        "SELECT a.id FROM tasks t JOIN agents a ON a.id = t.requester_id WHERE t.request_id = ? "
        "AND a.kind != 'operator'", (request_id,)).fetchone()
    return int(row[0]) if row else None


def ask(store: Store, agent_id: int, turn_id: str | None, kind: str, tool: str | None, summary: str,
        detail: Mapping[str, Any], options: Sequence[PermissionOption]) -> tuple[Approval, str | None, int]:
    """Record the agent's request, routed as its policy says (docs/guide/approvals.md): its task is the one its turn
    `turn_id` works on; under `lead` (and no allow rule matching) the sender of that task may answer it; a request an
    allow rule decides or the `deny` policy refuses has no deadline. Returns the pending record, the allow rule that
    matched (None: someone must answer) and the deadline's length (ms).

    Where nothing routes to a lead, three statements (a person waits to see it: docs/guide/approvals.md#speed): the
    agent's row, the turn's task, the insert; the record is made from what they gave, not read back."""
    policy, timeout_ms, allow, agent = _asking(store, agent_id)
    # An allow rule decides before any routing (docs/guide/approvals.md#allow-rules): no lead, no deadline.
    rule = matching_rule(allow, kind, tool, detail)
    request_ids = ledger.tasks_of_turn(store, turn_id) if turn_id else []
    request_id = request_ids[0] if request_ids else None
    # The lead is the sender of the task being worked on; a person's task (or none) has no lead: a person.
    lead = lead_of(store, request_id) if policy is Policy.LEAD and request_id and rule is None else None
    created_at = now_ms()
    deadline_at = None if policy is Policy.DENY or rule is not None else created_at + timeout_ms
    record = _insert(store, agent, agent_id, request_id, turn_id, kind, tool, summary, detail, options,
                     policy, lead, deadline_at, created_at)
    return record, rule, timeout_ms


def tell_lead(store: Store, approval_id: str, text: str, push: Pushable | None = None) -> tuple[str, str, bool] | None:
    """Admit the information record from Wardian (no sender) that brings a pending approval to its lead, as any
    information reaches an agent; `push` says whether it is admitted for a push into the lead's live conversation.
    Returns (record id, the lead's uuid, pushing); None when the approval has no lead or has ended already."""
    with store.atomic():
        row = store.db.execute(
            "SELECT p.answerer_id, a.uuid FROM approvals p JOIN agents a ON a.id = p.answerer_id "
            "WHERE p.public_id = ? AND p.status = 'pending'", (approval_id,)).fetchone()
        if row is None:
            return None
        lead_id, lead_uuid = int(row[0]), str(row[1])
        pushing = push is not None and push(lead_uuid)
        record_id = new_public_id(InteractionKind.INFORMATION)
        store.db.write(INSERT_INTERACTION, (record_id, InteractionKind.INFORMATION.value, None, lead_id, text, None,
                                            now_ms(), PUSH_SENDING if pushing else None))
    return record_id, lead_uuid, pushing


def open_approval(store: Store, agent_id: int, request_id: str | None, turn_id: str | None, kind: str,
                  tool: str | None, summary: str, detail: Mapping[str, Any], options: Sequence[PermissionOption],
                  policy: Policy, answerer_id: int | None, deadline_at: int | None) -> Approval:
    """Record a new pending approval; returns it."""
    return _insert(store, party_of_id(store.db, agent_id, {}), agent_id, request_id, turn_id, kind, tool, summary,
                   detail, options, policy, answerer_id, deadline_at, now_ms())


def _insert(store: Store, agent: Party, agent_id: int, request_id: str | None, turn_id: str | None, kind: str,
            tool: str | None, summary: str, detail: Mapping[str, Any], options: Sequence[PermissionOption],
            policy: Policy, answerer_id: int | None, deadline_at: int | None, created_at: int) -> Approval:
    """Insert a pending approval; the record it wrote, made from the same values (as `_of` would read them back)."""
    approval_id = f"{ID_PREFIX}{created_at:011x}{secrets.token_hex(8)}"
    shown = json.dumps(dict(detail), ensure_ascii=False, default=str)
    if len(shown) > MAX_DETAIL_CHARS:
        shown = json.dumps({"trimmed": shown[:MAX_DETAIL_CHARS]}, ensure_ascii=False)
    kept_tool = (tool or None) and tool[:MAX_SUMMARY_CHARS]
    with store.atomic():
        store.db.write(
            f"INSERT INTO approvals ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', NULL, 0, NULL, "
            "?, NULL)",
            (approval_id, agent_id, request_id, turn_id, kind, kept_tool, summary[:MAX_SUMMARY_CHARS], shown,
             json.dumps([list(o) for o in options]), policy.value, answerer_id, deadline_at, created_at))
    return Approval(
        approval_id=approval_id, agent=agent, request_id=request_id, turn_id=turn_id, kind=kind, tool=kept_tool,
        summary=summary[:MAX_SUMMARY_CHARS], detail=json.loads(shown),
        options=tuple(PermissionOption(*map(str, o)) for o in options), policy=policy,
        answerer=party_by_id(store.db, answerer_id, {}), deadline_at=deadline_at, status=ApprovalStatus.PENDING,
        decided_by=None, always=False, reason=None, created_at=created_at, ended_at=None)


def end(store: Store, approval_id: str, status: ApprovalStatus, decided_by: str, always: bool = False,
        reason: str | None = None, answerer_id: int | None = None) -> Approval:
    """End a pending approval; returns it ended. `answerer_id` set: only if that agent may answer it.

    Raises: UnknownApproval; ApprovalEnded (it had ended already: nothing changed); NotRecipient (an agent
        answering an approval that is not its to answer)."""
    assert status is not ApprovalStatus.PENDING
    with store.atomic():
        current = get(store, approval_id)
        if answerer_id is not None and (current.answerer is None or current.answerer.uuid != _uuid(store, answerer_id)):
            raise errors.NotRecipient(f"approval {approval_id} is not yours to answer", field="approval_id")
        kept_reason, ended_at = reason and reason[:MAX_REASON_CHARS], now_ms()
        changed = store.db.write(
            "UPDATE approvals SET status = ?, decided_by = ?, always = ?, reason = ?, ended_at = ? "
            "WHERE public_id = ? AND status = 'pending'",
            (status.value, decided_by, int(always), kept_reason, ended_at, approval_id)).rowcount
        if changed != 1:
            raise errors.ApprovalEnded(f"approval {approval_id} already ended: {current.status.value}",
                                       field="approval_id", status=current.status.value)
    # Read before the update in this transaction, ended by it: the record as `get` would read it now.
    return replace(current, status=status, decided_by=decided_by, always=always, reason=kept_reason,
                   ended_at=ended_at)


def restate(store: Store, approval_id: str, status: ApprovalStatus, decided_by: str) -> None:
    """Correct an end the provider never received (it withdrew the request between the commit and the answer)."""
    with store.atomic():
        store.db.write("UPDATE approvals SET status = ?, decided_by = ?, always = 0 WHERE public_id = ?",
                       (status.value, decided_by, approval_id))


def withdraw_pending(store: Store, agent_id: int | None, decided_by: str) -> list[str]:
    """End `withdrawn` every pending approval of the agent (None: of every agent of this host); their ids."""
    mine, args = of_this_host(store, "agent_id")
    which, more = (" AND agent_id = ?", (agent_id,)) if agent_id is not None else ("", ())
    with store.atomic():
        rows = store.db.execute(f"SELECT public_id FROM approvals WHERE status = 'pending'{mine}{which}",
                                (*args, *more)).fetchall()
        store.db.write(
            f"UPDATE approvals SET status = 'withdrawn', decided_by = ?, ended_at = ? WHERE status = 'pending'"
            f"{mine}{which}", (decided_by, now_ms(), *args, *more))
    return [str(r[0]) for r in rows]


def get(store: Store, approval_id: str) -> Approval:
    """Raises: UnknownApproval."""
    row = store.db.execute(f"SELECT {_COLS} FROM approvals WHERE public_id = ?", (approval_id,)).fetchone()
    if row is None:
        raise errors.UnknownApproval(f"no approval {approval_id[:80]!r} in this home", field="approval_id",
                                     allowed="an apr_ id of `wardian approval list`")
    return _of(store, row, {})


def listing(store: Store, pending_only: bool, limit: int) -> list[Approval]:
    """The newest `limit` approvals (only the pending ones when asked), oldest first."""
    where = "WHERE status = 'pending' " if pending_only else ""
    rows = store.db.execute(f"SELECT {_COLS} FROM approvals {where}ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
    cache: dict[int, Party] = {}
    return [_of(store, r, cache) for r in reversed(rows)]


def tallies(store: Store) -> dict[int, ApprovalTally]:
    """Each agent's approvals: counts and its newest one, by agent id."""
    counts = {int(r[0]): (int(r[1]), int(r[2])) for r in store.db.execute(
        "SELECT agent_id, count(*), sum(CASE WHEN status = 'pending' THEN 1 ELSE 0 END) FROM approvals "
        "GROUP BY agent_id").fetchall()}
    if not counts:
        return {}
    rows = store.db.execute(f"SELECT {_COLS} FROM approvals WHERE id IN "
                            "(SELECT max(id) FROM approvals GROUP BY agent_id)").fetchall()
    cache: dict[int, Party] = {}
    return {int(r[1]): ApprovalTally(*counts[int(r[1])], _of(store, r, cache)) for r in rows}


def _uuid(store: Store, agent_id: int) -> str:
    return str(store.db.execute("SELECT uuid FROM agents WHERE id = ?", (agent_id,)).fetchone()[0])


def _of(store: Store, r: Sequence[Any], cache: dict[int, Party]) -> Approval:
    return Approval(
        approval_id=r[0], agent=party_of_id(store.db, r[1], cache), request_id=r[2], turn_id=r[3], kind=r[4],
        tool=r[5], summary=r[6], detail=json.loads(r[7]),
        options=tuple(PermissionOption(*map(str, o)) for o in json.loads(r[8])), policy=Policy(r[9]),
        answerer=party_by_id(store.db, r[10], cache), deadline_at=r[11], status=ApprovalStatus(r[12]),
        decided_by=r[13], always=bool(r[14]), reason=r[15], created_at=r[16], ended_at=r[17])
