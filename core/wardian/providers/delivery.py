"""What every provider's conversation is given for wardian, as text: the structured `wardian_task_delivery` of a
task and the `wardian_inbox_delivery` of information, a reply or a notice.

Peer text always travels as a JSON string inside the item (never spliced into prose), so a peer cannot forge routing
metadata or another item (contract rule TXT-4, reliability row S9). Each provider wraps these texts in its own wire
shape.
"""

from __future__ import annotations

import json

from wardian.model import Interaction
from wardian.providers.base import TaskDelivery

TASK_ITEM_KIND = "wardian_task_delivery"
INBOX_ITEM_KIND = "wardian_inbox_delivery"


def task_text(task: TaskDelivery) -> str:
    """The structured task item of an idle delivery: the kind line, then the task as JSON."""
    return TASK_ITEM_KIND + "\n" + json.dumps({
        "request_id": task.request_id, "from": {"name": task.sender.name, "uuid": task.sender.uuid},
        "text": task.text,
        "reply": "Work on this task now. Your final answer in this turn is returned to the sender as this "
                 "task's reply; use the reply tool with this request_id only to answer differently.",
    }, ensure_ascii=False, indent=1)


def inbox_text(record: Interaction) -> str:
    """The structured inbox item of a pushed record: the kind line, then the record as JSON."""
    body = {"id": record.id, "kind": record.kind.value,
            "from": {"name": record.sender.name, "uuid": record.sender.uuid} if record.sender else "wardian",
            "request_id": record.request_id, "status": record.status.value if record.status else None,
            "text": record.text}
    return INBOX_ITEM_KIND + "\n" + json.dumps(body, ensure_ascii=False, indent=1)
