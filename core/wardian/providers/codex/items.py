"""What a Codex conversation is given: the structured wardian items of a task, a steer and an inbox push.

Peer text always travels as a JSON string inside the item (never spliced into prose), so a peer cannot forge
routing metadata or another item (reliability-matrix S9).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from wardian.model import Interaction
from wardian.providers.base import TaskDelivery

TASK_ITEM_KIND = "wardian_task_delivery"
INBOX_ITEM_KIND = "wardian_inbox_delivery"


def task_payload(task: TaskDelivery) -> str:
    """The structured `wardian_task_delivery` item of an idle delivery (`turn/start` input)."""
    return TASK_ITEM_KIND + "\n" + json.dumps({
        "request_id": task.request_id, "from": {"name": task.sender.name, "uuid": task.sender.uuid},
        "text": task.text,
        "reply": "Work on this task now. Your final answer in this turn is returned to the sender as this "
                 "task's reply; use the reply tool with this request_id only to answer differently.",
    }, ensure_ascii=False, indent=1)


def steer_context(task: TaskDelivery) -> str:
    """Routing metadata of a steered task (`additionalContext`); the peer text itself is the steer's input."""
    return json.dumps({"kind": TASK_ITEM_KIND, "request_id": task.request_id,
                       "from": {"name": task.sender.name, "uuid": task.sender.uuid},
                       "note": "The user message that follows is a task from this Wardian peer. Your final answer "
                               "in this turn is returned to it as the reply."}, ensure_ascii=False)


def inbox_items(records: Sequence[Interaction]) -> list[dict[str, Any]]:
    """`wardian_inbox_delivery` history items for `thread/inject_items` (information, replies, notices)."""
    items: list[dict[str, Any]] = []
    for record in records:
        body = {"id": record.id, "kind": record.kind.value,
                "from": {"name": record.sender.name, "uuid": record.sender.uuid} if record.sender else "wardian",
                "request_id": record.request_id, "status": record.status.value if record.status else None,
                "text": record.text}
        text = INBOX_ITEM_KIND + "\n" + json.dumps(body, ensure_ascii=False, indent=1)
        items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    return items
