"""Task chains and deadlines, as functions of a `Store`: the team's task policy, a new task's place in its chain (the
loop guard), and the deadlines the app settles (docs/guide/teams.md).

Invariants:
- A task made while its sender works on a task is that task's child: the sender's task is one it holds open (bound to
  a turn that has not ended, or taken by a receive) and has not answered. With several, the deepest is the parent,
  so a loop that keeps steering tasks into one running turn still grows deeper.
- A task past its deadline is completed through the task ledger like any other: its outcome (`failed`) is captured
  and published as one Wardian notice, so a reply or a turn's own result that got there first wins, and a later one
  finds the task completed. `end_reason` says the app ended it.
- A task still queued at its deadline (no receive returned it, no turn took it) leaves its recipient's mailbox as
  it ends: it is never delivered.
- A task whose dispatch claim may have a submission in flight is left to its binding (a moment later), so the turn
  it reached is known and can be interrupted.
"""

from __future__ import annotations

from wardian import errors
from wardian.model import Caller, Published, ReplyStatus
from wardian.store import ledger
from wardian.store._sql import now_ms, of_this_host
from wardian.store.api import Pushable
from wardian.store.engine import Store
from wardian.store.mailbox import NOT_RECEIVED, UNACKED
from wardian.taskpolicy import Expired, Lineage, OpenTask, TaskPolicy

DEADLINE_EXCEEDED = "deadline_exceeded"
MAX_EXPIRED_PER_PASS = 100
_POLICY_KEYS = ("task_deadline_ms", "max_task_depth", "max_chain_tasks")


# --- the policy -------------------------------------------------------------------------------------
def policy(store: Store) -> TaskPolicy:
    """The team's task policy; the defaults for what nobody set."""
    found = dict(store.db.execute("SELECT key, value FROM task_policy").fetchall())
    default = TaskPolicy()
    return TaskPolicy(found.get("task_deadline_ms"),
                      found.get("max_task_depth") or default.max_task_depth,
                      found.get("max_chain_tasks") or default.max_chain_tasks)


def set_policy(store: Store, new: TaskPolicy) -> TaskPolicy:
    """Replace the policy whole (`wardian up` gives every key: one the team file leaves out is its default)."""
    with store.atomic():
        store.db.write("DELETE FROM task_policy", ())
        for key in _POLICY_KEYS:
            store.db.write("INSERT INTO task_policy (key, value) VALUES (?, ?)", (key, getattr(new, key)))
    return new


# --- the loop guard ---------------------------------------------------------------------------------
def lineage(store: Store, caller: Caller, limits: TaskPolicy) -> Lineage:
    """Where a task `caller` makes now would stand in its chain.

    Raises:
        TaskDepthExceeded: it would make the chain deeper than `max_task_depth`.
        ChainBudgetExceeded: its chain already holds `max_chain_tasks` tasks.
    """
    row = store.db.execute(
        "SELECT request_id, COALESCE(root_request_id, request_id), depth FROM tasks WHERE recipient_id = ? "
        "AND reply_id IS NULL AND outcome_status IS NULL "
        "AND (state = 'submitted' OR (state = 'claimed' AND claimed_by = 'receive')) "
        "ORDER BY depth DESC, interaction_id DESC LIMIT 1", (caller.agent.id,)).fetchone()
    if row is None:
        return Lineage(None, None, 1)
    parent, root, depth = str(row[0]), str(row[1]), int(row[2]) + 1
    if depth > limits.max_task_depth:
        raise errors.TaskDepthExceeded(
            f"this task would stand {depth} deep in the chain that began with {root} (max_task_depth "
            f"{limits.max_task_depth}); it was not sent, to stop a delegation loop: finish {parent} yourself "
            "(reply to it) instead of delegating further", field="target", limit=limits.max_task_depth,
            depth=depth, root_request_id=root, parent_request_id=parent)
    count = int(store.db.execute("SELECT count(*) FROM tasks WHERE root_request_id = ?", (root,)).fetchone()[0])
    if count >= limits.max_chain_tasks:
        raise errors.ChainBudgetExceeded(
            f"the chain that began with {root} already holds {count} tasks (max_chain_tasks "
            f"{limits.max_chain_tasks}); this task was not sent: finish {parent} yourself (reply to it) instead of "
            "delegating further", field="target", limit=limits.max_chain_tasks, tasks=count,
            root_request_id=root, parent_request_id=parent)
    return Lineage(parent, root, depth)


# --- the deadlock guard ----------------------------------------------------------------------------
def open_tasks_of(store: Store, requester_ids: tuple[int, ...]) -> list[OpenTask]:
    """Every task these agents assigned that is not answered yet (index `tasks_open_by_requester`), with whether its
    recipient's model has it: taken by a receive, or the first task of the turn it is bound to."""
    marks = ", ".join("?" for _ in requester_ids)
    rows = store.db.execute(
        "SELECT t.request_id, t.requester_id, q.name, t.recipient_id, r.name, r.uuid, "
        "CASE WHEN t.state = 'claimed' AND t.claimed_by = 'receive' AND t.outcome_status IS NULL THEN 1 ELSE 0 END, "
        "CASE WHEN t.state = 'submitted' AND t.outcome_status IS NULL AND NOT EXISTS (SELECT 1 FROM tasks f "
        "WHERE f.turn_id = t.turn_id AND f.recipient_id = t.recipient_id AND f.interaction_id < t.interaction_id) "
        "THEN t.turn_id END "
        "FROM tasks t JOIN agents q ON q.id = t.requester_id JOIN agents r ON r.id = t.recipient_id "
        f"WHERE t.requester_id IN ({marks}) AND t.reply_id IS NULL ORDER BY t.interaction_id",
        requester_ids).fetchall()
    return [OpenTask(str(r[0]), int(r[1]), str(r[2]), int(r[3]), str(r[4]), str(r[5]), bool(r[6]), r[7])
            for r in rows]


# --- deadlines --------------------------------------------------------------------------------------
def next_deadline(store: Store) -> int | None:
    """The earliest deadline (Unix ms) of a task of this host not answered yet; None: none."""
    mine, args = of_this_host(store, "recipient_id")
    row = store.db.execute(
        f"SELECT min(deadline_at) FROM tasks WHERE deadline_at IS NOT NULL AND reply_id IS NULL{mine}", args
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def expire_due(store: Store, text: str, push: Pushable | None = None) -> tuple[list[Expired], bool]:
    """End every task of this host whose deadline has passed: one `failed` notice from Wardian each (`text`), reason
    `deadline_exceeded`. Returns what was ended (with the turn each was bound to, if still running) and whether a
    due task was left because its submission may be in flight."""
    now = now_ms()
    mine, args = of_this_host(store, "t.recipient_id")
    rows = store.db.execute(
        "SELECT t.request_id, t.state, t.claimed_by, t.turn_id, t.outcome_status, t.claim_generation, r.uuid "
        "FROM tasks t JOIN agents r ON r.id = t.recipient_id "
        f"WHERE t.deadline_at IS NOT NULL AND t.deadline_at <= ? AND t.reply_id IS NULL{mine} "
        "ORDER BY t.deadline_at LIMIT ?", (now, *args, MAX_EXPIRED_PER_PASS)).fetchall()
    ended: list[Expired] = []
    in_flight = False
    for rid, state, claimed_by, turn_id, outcome, generation, recipient_uuid in rows:
        if state == "claimed" and claimed_by == "dispatch":
            in_flight = True
            continue
        published = _end(store, rid, text, push)
        if published is None:
            continue
        running = turn_id if state == "submitted" and outcome is None else None
        ended.append(Expired(rid, published.requester_uuid, published.record_id, published.pushing,
                             recipient_uuid, running, generation))
    return ended, in_flight


def _end(store: Store, request_id: str, text: str, push: Pushable | None) -> Published | None:
    with store.atomic():
        if not ledger.capture_outcome(store, request_id, ReplyStatus.FAILED, text):
            return None  # the turn's own outcome got there first: it is published as it is
        published = ledger.publish_outcome(store, request_id, push)
        store.db.write("UPDATE tasks SET end_reason = ? WHERE request_id = ?", (DEADLINE_EXCEEDED, request_id))
        # A task no receive returned and no turn took is withdrawn from its recipient's mailbox: never delivered.
        store.db.write(f"UPDATE interactions SET acked_at = ? WHERE public_id = ? AND {UNACKED} AND {NOT_RECEIVED}",
                       (now_ms(), request_id))
        return published


def late_reply(store: Store, request_id: str) -> errors.DeadlineExceeded | None:
    """The error a reply to `request_id` gets when the app ended the task at its deadline; None otherwise."""
    row = store.db.execute("SELECT deadline_at, reply_id FROM tasks WHERE request_id = ? AND end_reason = ?",
                           (request_id, DEADLINE_EXCEEDED)).fetchone()
    if row is None:
        return None
    return errors.DeadlineExceeded(
        f"the task's deadline passed at {row[0]} (Unix ms) and wardian ended it as failed ({DEADLINE_EXCEEDED}); "
        "this reply came too late and was not delivered", field="request_id", status="failed", reply_id=row[1],
        deadline_at=row[0], reason=DEADLINE_EXCEEDED)
