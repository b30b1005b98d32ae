"""Pi's session files, as wardian reads them: finding an agent's session by its id, and what a killed app lost, settled
from the file at the next app start (never by asking the model, never by resending).

Pi keeps each session in `<session dir>/<ISO time>_<session id>.jsonl`, one entry per line, appended as each message
ends (https://github.com/badlogic/pi-mono/blob/main/packages/coding-agent/docs/sessions.md). A task's prompt is a user
message whose text carries the task's `request_id` (the structured task item, `wardian.providers.delivery`). For each
lost delivery the file says: its run answered (the first assistant message after the task that ended the run's step:
`stop` is the task's `done` reply, `aborted` interrupted, `error` failed), the prompt was taken but no answer was
written (Pi was killed first), or it is not there (it may never have reached Pi). A run that took a steered task after
its answer cannot be told apart from one that did not: the first answer after the task is taken
(docs/guide/pi.md#what-is-verified).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wardian.providers.base import Finding, LostDelivery, Recovery
from wardian.providers.pi.turns import message_text, outcome_of

log = logging.getLogger("wardian.pi")

TERMINAL = ("stop", "aborted", "error", "length")


def session_file(session_dir: Path, session_id: str) -> Path | None:
    """The file of the session `session_id` (None: Pi never wrote it: a session is written at its first message)."""
    if not session_id or "/" in session_id or "*" in session_id:
        return None
    found = sorted(session_dir.glob(f"*_{session_id}.jsonl"))
    return found[-1] if found else None


def _messages(path: Path) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill
            message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "message" else None
            if isinstance(message, dict):
                messages.append(message)
    return messages


def look_up(path: Path, delivery: LostDelivery) -> Recovery:
    """What the session file says of one lost delivery (module docstring). Raises: OSError (unreadable)."""
    messages = _messages(path)
    marker = json.dumps(delivery.request_id)
    start = next((i for i, m in enumerate(messages)
                  if m.get("role") == "user" and marker in message_text(m)), None)
    if start is None:
        return Recovery(delivery.request_id, Finding.NOT_FOUND)
    for message in messages[start + 1:]:
        if message.get("role") == "assistant" and message.get("stopReason") in TERMINAL:
            return Recovery(delivery.request_id, Finding.ANSWERED, outcome_of(delivery.message_id or "", message))
    return Recovery(delivery.request_id, Finding.TAKEN)


def recover(session_dir: Path, deliveries: Sequence[LostDelivery]) -> list[Recovery]:
    """Settle the lost deliveries of one agent from its session file (blocking). A delivery whose file cannot be read
    is left out: it stays as it is (uncertain)."""
    settled: list[Recovery] = []
    for delivery in deliveries:
        path = session_file(session_dir, delivery.thread_id or "")
        if path is None:
            settled.append(Recovery(delivery.request_id, Finding.NOT_FOUND))
            continue
        try:
            settled.append(look_up(path, delivery))
        except OSError as exc:
            log.warning("%s: the session file %s could not be read (%s); task %s stays uncertain",
                        delivery.agent_name, path, exc, delivery.request_id)
    return settled
