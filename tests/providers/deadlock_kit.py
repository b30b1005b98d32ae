"""A scripted model that plays one agent of a deadlock test (tests/providers/opencode/test_deadlock.py,
tests/providers/codex/test_deadlock.py): it assigns its peer a task, then waits for the answer the way a model that
follows wardian's tool descriptions does (wait_agent, receive_messages, acknowledge, wait again), and answers a task it
holds when a wait tells it that nobody else will (docs/guide/teams.md)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from wardian_harness.models.scripted_model import Message, ToolCall, function_call_outputs
from wardian_harness.models.scripted_model.reading import developer_texts, user_texts

TASK = "wardian_task_delivery"
DELIVERIES = ("wardian_task_delivery\n{", "wardian_inbox_delivery\n{", "<wardian_task_delivery>{")


def deliveries(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tasks and records the app delivered into the conversation: a turn's task and pushed records (user
    messages), and a steered task's routing (Codex's additionalContext, a developer message)."""
    return [json.loads(text[text.index("{"):text.rindex("}") + 1]) for text in [*user_texts(body),
                                                                               *developer_texts(body)]
            if text.startswith(DELIVERIES)]


@dataclass
class Player:
    """One agent's model: `waits` is every wait_agent result it read, `held` the tasks a receive gave it."""

    name: str
    peer: str
    wait_ms: int
    patience: int = 2
    """How many waits may time out before the model gives up (answers its own task without its peer's answer)."""
    waits: list[dict[str, Any]] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    mine: str | None = None
    answer: str | None = None
    seen: set[str] = field(default_factory=set)
    trace: list[str] = field(default_factory=list)
    """What the model read and did, step by step (shown when a test fails)."""
    gate: threading.Barrier | None = None
    """Shared by players whose turns must all be running before any assigns its task (each waits at its first step)."""

    def steps(self, count: int = 40) -> list[Any]:
        return [self.first, *[self.step] * count]

    def first(self, body: dict[str, Any]) -> ToolCall:
        if self.gate is not None:
            self.gate.wait(timeout=120)  # a bounded rendezvous of the model's request threads, not a sleep
        return self.assign()

    def assign(self) -> ToolCall:
        return ToolCall("followup_task", {"target": self.peer, "message": f"{self.name} asks {self.peer}"})

    def step(self, body: dict[str, Any]) -> Any:
        answer = self._step(body)
        outputs = function_call_outputs(body)
        read = f"{outputs[-1].name}: {outputs[-1].text[-160:]}" if outputs else "no tool output"
        self.trace.append(f"{read} -> {getattr(answer, 'name', None) or getattr(answer, 'text', answer)}")
        return answer

    def _step(self, body: dict[str, Any]) -> Any:
        outputs = function_call_outputs(body)
        if not outputs:  # a steer cut the first answer short (Codex asks again): the task is not assigned yet
            return self.assign()
        out = outputs[-1]
        # Codex wraps a tool's output in lines of its own ("Wall time: ...", "Output:"); OpenCode passes it bare.
        result = json.loads(out.text[out.text.index("{"):out.text.rindex("}") + 1])
        if out.name == "followup_task":
            self.mine = result["request_id"]
            return self._wait()
        if out.name == "wait_agent":
            return self._after_wait(body, result)
        if out.name == "receive_messages":
            return self._after_receive(body, result)
        if out.name == "reply":
            return self._next(body) or self._wait()
        raise AssertionError(f"{self.name}: unexpected tool result {out.name}: {out.text[:200]}")

    def _wait(self) -> ToolCall:
        return ToolCall("wait_agent", {"timeout_ms": self.wait_ms})

    def _after_wait(self, body: dict[str, Any], result: dict[str, Any]) -> Any:
        self.waits.append(result)
        if result["wake_reason"] == "deadlock":
            return self._answer(result["deadlock"]["holding"][0])
        if result["wake_reason"] == "mailbox_activity":
            return ToolCall("receive_messages", {})
        if (late := self._next(body)) is not None:
            return late
        if sum(w["timed_out"] for w in self.waits) >= self.patience:
            return Message(f"{self.name} gave up waiting")
        return self._wait()

    def _next(self, body: dict[str, Any]) -> Any:
        """What a diligent model does next with what the app put into its conversation instead of its mailbox (a task
        steered into this turn, a reply pushed): answer the peer's task it has not answered, else finish once its own
        answer is in, else wait (None from a wait's result: the caller decides whether to wait again)."""
        for item in deliveries(body):
            if item.get("kind") == "reply" and item.get("request_id") == self.mine:
                self.answer = str(item["text"])
        for item in deliveries(body):
            sender, rid = item.get("from") or {}, str(item.get("request_id"))
            if item.get("kind", TASK) == TASK and sender.get("name") == self.peer and rid not in {*self.seen,
                                                                                                  *self.held}:
                return self._answer(rid)
        if self.answer is not None:
            return Message(f"{self.name} done: {self.answer}")
        return None

    def _answer(self, request_id: str) -> ToolCall:
        self.held.append(request_id)
        return ToolCall("reply", {"request_id": request_id, "status": "done",
                                  "message": f"{self.name} answers {request_id}"})

    def _after_receive(self, body: dict[str, Any], result: dict[str, Any]) -> Any:
        for record in result["records"]:
            if record["kind"] == "reply" and record["request_id"] == self.mine:
                self.answer = record["text"]
            elif record["kind"] == "task":
                self.seen.add(record["request_id"])
        if result["records"]:
            return ToolCall("receive_messages", {"ack_cursor": result["cursor"]})
        return self._next(body) or self._wait()
