"""Steering a Qwen Code turn (docs/guide/acp.md): a task for a busy Qwen Code agent is handed over at the turn's next
tool boundary, when Qwen Code asks for queued messages (`craft/drainMidTurnQueue`), and the turn's end answers it
too. Gemini CLI has no such hook: there the task waits for the turn's end (`test_app`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import app_on_root, pinned_npm_tool, short_home
from tests.providers.acp.conftest import REPO, AcpApp, collect, settle, state_of
from wardian_harness.acceptance.exchange import PLAIN_REQUEST, SENDER_ANSWER, WORKER_ANSWER, script_exchange
from wardian_harness.models.scripted_model import Message, ScriptedModel, Step, ToolCall

STEERED = "[User message received during tool execution]"


class Gate:
    """A step that answers with `step` only once the test opens the gate (`reached`: the request came)."""

    def __init__(self, step: Step) -> None:
        self.step = step
        self.reached = threading.Event()
        self.open = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Step:
        self.reached.set()
        self.open.wait(120)
        return self.step


@pytest.fixture
def qwen_app() -> Iterator[AcpApp]:
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI")
    env = {"WARDIAN_QWEN": str(cli)}
    with ScriptedModel() as model, app_on_root(short_home("wst"), env) as handle:
        yield AcpApp(handle, model, env, "qwen")


def test_a_task_for_a_busy_qwen_agent_joins_the_turn_at_its_next_tool_boundary(qwen_app: AcpApp) -> None:
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    gate = Gate(ToolCall("list_agents", {}))
    script.add(gate, Message("both answered"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "first"})
    assert gate.reached.wait(120)
    turn = world.wait_status("worker", "active")["active_turn_id"]
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "second, steered"})
    for _ in range(2400):  # claimed by the dispatcher, and waiting in the steering queue
        if state_of(world, second["request_id"]) == "claimed":
            break
        settle()
    gate.open.set()
    got = {r["request_id"]: (r["status"], r["text"]) for r in collect(world, lead, 2)}
    assert got == {first["request_id"]: ("done", "both answered"), second["request_id"]: ("done", "both answered")}
    facts = [world.app.call("request/show", {"id": t["request_id"]})["task"]["facts"] for t in (first, second)]
    assert [f["turn_id"] for f in facts] == [turn, turn]
    prompts = [r for r in script.requests if r.answered_by != "side"]
    assert len([r for r in prompts if STEERED in json.dumps(r.body)]) >= 1
    assert second["request_id"] in json.dumps(prompts[-1].body)


def test_information_for_a_busy_qwen_agent_joins_the_turn_at_its_next_tool_boundary(qwen_app: AcpApp) -> None:
    """Information starts no turn; while one runs it is handed over at its next tool boundary as a steered task is,
    and is then in the conversation (not on the receive path). The sender does not wait for the boundary."""
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, worker, script = world.agent("worker")
    gate = Gate(ToolCall("list_agents", {}))
    script.add(gate, Message("done, with the news"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "work"})
    assert gate.reached.wait(120)
    world.wait_status("worker", "active")
    sent = world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI: main is green"})
    assert sent["delivery"] == "admitted"  # returned before the boundary came
    gate.open.set()
    (reply,) = collect(world, lead, 1)
    assert (reply["request_id"], reply["text"]) == (task["request_id"], "done, with the news")
    prompts = [r for r in script.requests if r.answered_by != "side"]
    steered = [r for r in prompts if STEERED in json.dumps(r.body)]
    assert steered
    assert "FYI: main is green" in json.dumps(steered[0].body)
    assert sent["interaction_id"] in json.dumps(steered[0].body)
    # In the conversation, so never also on the receive path.
    assert world.app.call("mailbox/receive", {"session": worker, "limit": 100})["records"] == []


def test_a_reply_for_a_qwen_lead_waiting_in_receive_messages_is_received_at_once(qwen_app: AcpApp) -> None:
    """A record offered to a running turn stays on the receive path until a tool boundary takes it, so a lead whose
    turn waits in `receive_messages` gets the reply from that receive (and sees it once)."""
    world = qwen_app
    _, human, _ = world.agent("human", start=False)
    _, _, lead = world.agent("lead", approve=["followup_task"])
    _, _, worker = world.agent("worker")
    receipts: list[dict[str, Any]] = []
    script_exchange(lead, worker, receipts)
    task = world.app.call("task/followup", {"session": human, "target": "lead", "message": PLAIN_REQUEST})
    (answer,) = collect(world, human, 1)
    assert (answer["request_id"], answer["text"]) == (task["request_id"], SENDER_ANSWER)
    received = [o.text for r in lead.requests for o in r.function_call_outputs() if o.name == "receive_messages"]
    assert any(WORKER_ANSWER in text for text in received)
