"""What a Codex conversation is given: the task item of a `turn/start`, the routing context of a `turn/steer` and
the history items of a `thread/inject_items` push (the texts themselves are `wardian.providers.delivery`'s)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from wardian.model import Interaction
from wardian.providers.base import TaskDelivery
from wardian.providers.delivery import INBOX_ITEM_KIND, TASK_ITEM_KIND, inbox_text, task_text

__all__ = ["INBOX_ITEM_KIND", "TASK_ITEM_KIND", "inbox_items", "steer_context", "task_payload"]


def task_payload(task: TaskDelivery) -> str:
    """The structured `wardian_task_delivery` item of an idle delivery (`turn/start` input)."""
    return task_text(task)


def steer_context(task: TaskDelivery) -> str:
    """Routing metadata of a steered task (`additionalContext`); the peer text itself is the steer's input."""
    return json.dumps({"kind": TASK_ITEM_KIND, "request_id": task.request_id,
                       "from": {"name": task.sender.name, "uuid": task.sender.uuid},
                       "note": "The user message that follows is a task from this Wardian peer. Your final answer "
                               "in this turn is returned to it as the reply."}, ensure_ascii=False)


def inbox_items(records: Sequence[Interaction]) -> list[dict[str, Any]]:
    """`wardian_inbox_delivery` history items for `thread/inject_items` (information, replies, notices)."""
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": inbox_text(record)}]}
            for record in records]
