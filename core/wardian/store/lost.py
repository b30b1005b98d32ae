"""Restart-lost tasks: the dispatched tasks a killed app left `uncertain` (`TaskLedger.mark_lost_bindings_uncertain`),
read back at the next start so each agent's provider can settle them from its own records (a Claude Code session
transcript). Both reads go through the partial index of uncertain tasks, so their cost follows the number of
uncertain tasks, never the number of all tasks.
"""

from __future__ import annotations

from wardian.model import LostTask
from wardian.store._sql import Tx, of_this_host


def restart_lost_tasks(tx: Tx, reason: str) -> list[LostTask]:
    mine, args = of_this_host(tx, "recipient_id")
    rows = tx.db.execute(
        "SELECT request_id, recipient_id, thread_id, COALESCE(provider_message_id, turn_id) FROM tasks "
        "WHERE state = 'uncertain' AND uncertain_reason = ? AND outcome_status IS NULL AND reply_id IS NULL"
        f"{mine} ORDER BY interaction_id",
        (reason, *args),
    ).fetchall()
    return [LostTask(r[0], r[1], r[2], r[3]) for r in rows]


def restate_uncertain(tx: Tx, request_id: str, reason: str, *, looked_up: bool) -> bool:
    with tx.atomic():
        return tx.db.write(
            "UPDATE tasks SET uncertain_reason = ?, lookup = CASE WHEN ? THEN 'not_found' ELSE lookup END "
            "WHERE request_id = ? AND state = 'uncertain' AND outcome_status IS NULL AND reply_id IS NULL",
            (reason, looked_up, request_id),
        ).rowcount == 1
