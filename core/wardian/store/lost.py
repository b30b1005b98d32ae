"""Restart-lost tasks: the dispatched tasks a killed app left `uncertain` (`ledger.mark_lost_bindings_uncertain`),
read back at the next start so each agent's provider can settle them from its own records (a Claude Code session
transcript). Both reads go through the partial index of uncertain tasks, so their cost follows the number of
uncertain tasks, never the number of all tasks.
"""

from __future__ import annotations

from wardian.model import LostTask
from wardian.store._sql import of_this_host
from wardian.store.engine import Store


def restart_lost_tasks(store: Store, reason: str) -> list[LostTask]:
    """This host's tasks `mark_lost_bindings_uncertain(reason)` left uncertain that have neither an outcome nor
    a reply yet, oldest first (an index of uncertain tasks bounds the read, never a scan of all tasks)."""
    mine, args = of_this_host(store, "recipient_id")
    rows = store.db.execute(
        "SELECT request_id, recipient_id, thread_id, COALESCE(provider_message_id, turn_id) FROM tasks "
        "WHERE state = 'uncertain' AND uncertain_reason = ? AND outcome_status IS NULL AND reply_id IS NULL"
        f"{mine} ORDER BY interaction_id",
        (reason, *args),
    ).fetchall()
    return [LostTask(r[0], r[1], r[2], r[3]) for r in rows]


def restate_uncertain(store: Store, request_id: str, reason: str, looked_up: bool = False) -> bool:
    """Say why an uncertain task (no outcome, no reply) stays uncertain once its provider's records were read;
    `looked_up`: the message was looked for and not found. It stays uncertain either way."""
    with store.atomic():
        return store.db.write(
            "UPDATE tasks SET uncertain_reason = ?, lookup = CASE WHEN ? THEN 'not_found' ELSE lookup END "
            "WHERE request_id = ? AND state = 'uncertain' AND outcome_status IS NULL AND reply_id IS NULL",
            (reason, looked_up, request_id),
        ).rowcount == 1
