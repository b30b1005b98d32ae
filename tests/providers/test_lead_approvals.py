"""The lead answers (docs/guide/approvals.md#the-lead-answers): a Claude Code worker started with `--approvals lead`
asks to run a command while it works on a task a Codex lead assigned; the approval reaches the lead's conversation as
information from Wardian, and the lead's model answers with `answer_approval`. Real Codex, real Claude Code, one real
app and the scripted model, one world for the module."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, app_on_root, pinned_npm_tool, short_home
from wardian import errors
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.models.scripted_model.steps import JsonDict
from wardian_harness.providers.claude_home import ScriptedClaude, claude_overrides
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides
from wardian_harness.providers.codex_install import find_codex

REPO = Path(__file__).resolve().parents[2]
APPROVAL_ID = re.compile(r"apr_[0-9a-f]{27}")
WAIT = {"timeout_ms": 60_000}
BOUND_S = 120.0

pytestmark = pytest.mark.timeout(600)


@dataclass
class Team:
    app: AppHandle
    model: ScriptedModel
    other: str
    """The session of an agent that is nobody's lead."""
    made: Path
    """The file the worker's command makes."""
    read: list[str] = field(default_factory=list)
    """What the lead's model was given when it answered each approval: the request's text, newest last."""

    def touch(self) -> ToolCall:
        return ToolCall("Bash", {"command": f"touch {self.made}", "description": "Make a file"}, namespace=None)

    def answering(self, decision: str, reason: str | None = None,
                  gate: threading.Event | None = None) -> Callable[[JsonDict], ToolCall]:
        """The lead model's step: `answer_approval` for the newest approval id in its conversation (after `gate`)."""

        def step(body: JsonDict) -> ToolCall:
            if gate is not None and not gate.wait(BOUND_S):
                raise AssertionError("the test never opened the gate")
            text = json.dumps(body, ensure_ascii=False)
            self.read.append(text)
            args: dict[str, Any] = {"approval_id": APPROVAL_ID.findall(text)[-1], "decision": decision}
            if reason is not None:
                args["reason"] = reason
            return ToolCall("answer_approval", args)

        return step


@pytest.fixture(scope="module")
def team() -> Iterator[Team]:
    env = {"WARDIAN_CODEX": str(find_codex()), "WARDIAN_SCRIPTED_MODEL_KEY": "scripted",
           "WARDIAN_CLAUDE": str(pinned_npm_tool(REPO / "node_modules" / ".bin" / "claude", "Claude Code CLI"))}
    with ScriptedModel() as model, app_on_root(short_home("wla"), env) as app:
        app.add_agent("lead", "codex")
        worker, _ = app.add_agent("worker", "claude")
        _, other = app.add_agent("other", "codex")
        app.call("agent/start", {"agent": "worker", "approvals": "lead", "config": [
            *claude_overrides(ScriptedClaude(model.agent("worker").base_url))]}, timeout_s=300)
        app.call("agent/start", {"agent": "lead", "approve_tools": ["followup_task", "answer_approval"],
                                 "config": codex_overrides(ScriptedProvider(model.agent("lead").base_url))},
                 timeout_s=300)
        yield Team(app, model, other, app.home.default_workspace(worker["uuid"]) / "made")


def lead_steps(team: Team, answer: Callable[[JsonDict], ToolCall], final: str) -> None:
    """The lead's turn: assign the worker its task, wait for what comes, answer the approval, wait for the reply."""
    team.model.agent("lead").add(ToolCall("followup_task", {"target": "worker", "message": "make a file"}),
                                 ToolCall("receive_messages", WAIT), answer, ToolCall("receive_messages", WAIT),
                                 Message(final))


def answered(app: AppHandle, request_id: str) -> dict[str, Any]:
    """The answer of task `request_id`, once it has one (bounded poll)."""
    for _ in range(2400):
        answer = app.call("request/show", {"id": request_id})["answer"]
        if answer is not None:
            return dict(answer)
        threading.Event().wait(0.05)
    raise AssertionError(f"task {request_id} got no answer")


def pending(app: AppHandle) -> dict[str, Any]:
    """The worker's one pending approval, once the app shows it (bounded poll)."""
    for _ in range(2400):
        found = app.call("approval/list", {})["approvals"]
        if found:
            (approval,) = found
            return dict(approval)
        threading.Event().wait(0.05)
    raise AssertionError("no approval appeared")


def newest_approval(app: AppHandle) -> dict[str, Any]:
    """The newest approval (the one the running scenario made)."""
    return dict(app.call("approval/list", {"pending": False})["approvals"][-1])


def test_a_codex_lead_allows_its_claude_code_workers_command_and_the_worker_is_done(team: Team) -> None:
    """The issue's end to end: the approval reaches the Codex lead with what it needs; its model's `answer_approval`
    allow runs the command, and the worker's reply to the lead is `done`."""
    team.made.unlink(missing_ok=True)
    lead_steps(team, team.answering("allow"), "the worker made it")
    team.model.agent("worker").add(team.touch(), Message("made it"))
    ask = team.app.call("operator/followup", {"target": "lead", "message": "have the worker make a file"})

    assert answered(team.app, ask["request_id"])["text"] == "the worker made it"
    assert team.made.exists()
    approval = newest_approval(team.app)
    worked = answered(team.app, approval["request_id"])
    assert (worked["status"], worked["text"]) == ("done", "made it")
    assert (approval["status"], approval["decided_by"], approval["answerer"]["name"], approval["policy"]) == (
        "allowed", "lead", "lead", "lead")
    (told,) = [r for r in team.app.call("mailbox/records", {"limit": 1000})["records"]
               if approval["approval_id"] in r["text"]]
    assert (told["kind"], told["sender_kind"], told["recipient"]["name"]) == ("information", "wardian", "lead")
    read = team.read[-1]
    for shown in (approval["approval_id"], "worker", approval["request_id"], f"touch {team.made}", "answer_approval",
                  "Unanswered by"):
        assert shown in read, shown


def test_a_lead_s_deny_keeps_the_command_from_running_and_the_worker_s_model_reads_the_reason(team: Team) -> None:
    """`answer_approval` deny with a reason: the command never runs, and Claude Code's model reads the reason."""
    team.made.unlink(missing_ok=True)
    lead_steps(team, team.answering("deny", "not on a Friday"), "the worker could not")
    worker = team.model.agent("worker")
    worker.add(team.touch(), Message("could not"))
    ask = team.app.call("operator/followup", {"target": "lead", "message": "have the worker make a file"})

    assert answered(team.app, ask["request_id"])["text"] == "the worker could not"
    assert not team.made.exists()
    approval = newest_approval(team.app)
    assert (approval["status"], approval["decided_by"], approval["reason"]) == ("denied", "lead", "not on a Friday")
    assert answered(team.app, approval["request_id"])["status"] == "done"
    assert "not on a Friday" in worker.requests[-1].function_call_outputs()[-1].text


def test_another_agent_cannot_answer_and_after_a_person_answers_the_lead_s_answer_is_refused(team: Team) -> None:
    """Only the lead may answer (`not_recipient`, nothing changes); a person may answer first, and then the lead's
    `answer_approval` fails with `approval_ended`, which its model reads."""
    team.made.unlink(missing_ok=True)
    gate = threading.Event()
    lead_steps(team, team.answering("deny", gate=gate), "the worker made it anyway")
    team.model.agent("worker").add(team.touch(), Message("made it"))
    ask = team.app.call("operator/followup", {"target": "lead", "message": "have the worker make a file"})
    try:
        approval = pending(team.app)
        with pytest.raises(errors.NotRecipient):
            team.app.call("approval/answer", {"session": team.other, "approval_id": approval["approval_id"],
                                              "decision": "allow"})
        assert team.app.call("approval/show", {"approval_id": approval["approval_id"]})["status"] == "pending"
        assert not team.made.exists()
        assert team.app.cli("approval", "allow", approval["approval_id"]).returncode == 0
    finally:
        gate.set()

    assert answered(team.app, ask["request_id"])["text"] == "the worker made it anyway"
    assert team.made.exists()
    ended = team.app.call("approval/show", {"approval_id": approval["approval_id"]})
    assert (ended["status"], ended["decided_by"]) == ("allowed", "person")
    lead = team.model.agent("lead")
    told = [o.text for r in lead.requests for o in r.function_call_outputs() if "answer_approval" in (o.name or "")]
    assert "approval_ended" in told[-1]


def test_under_lead_a_person_s_task_is_answered_by_a_person(team: Team) -> None:
    """A task a person sent has no lead: its approval waits for a person (`answerer` null) and reaches no agent."""
    team.made.unlink(missing_ok=True)
    team.model.agent("worker").add(team.touch(), Message("made it for you"))
    before = len(team.model.agent("lead").requests)
    ask = team.app.call("operator/followup", {"target": "worker", "message": "make a file"})
    approval = pending(team.app)
    assert (approval["request_id"], approval["policy"], approval["answerer"]) == (ask["request_id"], "lead", None)
    assert team.app.cli("approval", "allow", approval["approval_id"]).returncode == 0
    assert answered(team.app, ask["request_id"])["text"] == "made it for you"
    assert team.made.exists()
    assert len(team.model.agent("lead").requests) == before
