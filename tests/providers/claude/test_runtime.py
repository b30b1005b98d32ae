"""The Claude Code runtime on the real Claude Code CLI (pinned, from npm) and the scripted model's Messages dialect:
delivery (idle, mid-turn, information), completion matched by message uuid, interruption, resumption, and the
process's end (docs/providers/claude.md)."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import psutil
import pytest

from tests.providers.claude.conftest import ClaudeWorld, running
from wardian import errors
from wardian.model import AgentStatus, Interaction, InteractionKind, Party
from wardian.providers.base import OutcomeStatus, TaskDelivery
from wardian_harness.models.scripted_model import AgentScript, Hold, Message, RecordedRequest, Step, ToolCall

pytestmark = pytest.mark.anyio

LEAD = Party(name="lead", uuid="00000000-0000-4000-8000-000000000001")
WORKER = Party(name="worker", uuid="00000000-0000-4000-8000-000000000002")
ECHO = ToolCall("Bash", {"command": "echo tool-ran", "description": "Print a word"}, namespace=None)


def task(text: str, rid: str = "ask_1") -> TaskDelivery:
    return TaskDelivery(request_id=rid, sender=LEAD, text=text)


class Gate:
    """A step that answers with `step` only once the test opens the gate (`reached` says the request came)."""

    def __init__(self, step: Step) -> None:
        self.step = step
        self.reached = threading.Event()
        self.open = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Step:
        self.reached.set()
        self.open.wait(60)
        return self.step

    async def wait_reached(self) -> None:
        assert await anyio.to_thread.run_sync(self.reached.wait, 60.0), "no model request reached the gate"


async def requests(script: AgentScript, count: int) -> list[RecordedRequest]:
    return await anyio.to_thread.run_sync(script.wait_for_requests, count, 60.0)


def sent_texts(request: RecordedRequest) -> str:
    return json.dumps(request.body["messages"], ensure_ascii=False)


async def test_an_idle_task_is_one_message_under_the_planned_uuid_answered_by_its_result(
        claude_world: ClaudeWorld) -> None:
    script = claude_world.model.agent("worker", Message("The answer is 42."))
    async with running(claude_world.spec("worker", script)) as run:
        runtime = run.runtime
        assert runtime.ready
        planned = runtime.plan_message_id()
        assert planned is not None
        started = await runtime.start_turn(task("What is 6 x 7?"), planned)
        assert started.turn_id == planned
        assert started.confirmed_by_lookup is None
        outcome = await run.outcome(planned)
    assert (outcome.status, outcome.final_text) == (OutcomeStatus.DONE, "The answer is 42.")
    states = [(s.status, s.active_turn_id) for s in run.states()]
    assert states[:3] == [(AgentStatus.IDLE, None), (AgentStatus.ACTIVE, planned), (AgentStatus.IDLE, None)]
    assert states[-1] == (AgentStatus.OFF, None)
    sent = script.requests[0].user_texts()
    assert any("wardian_task_delivery" in t and "What is 6 x 7?" in t and "ask_1" in t for t in sent)


def note(text: str) -> Interaction:
    return Interaction(id="msg_note1", kind=InteractionKind.INFORMATION, sender=LEAD, recipient=WORKER, text=text,
                       created_at=1, request_id=None, status=None, acked=False)


async def test_information_makes_no_model_request_and_is_seen_in_the_next_turn(claude_world: ClaudeWorld) -> None:
    script = claude_world.model.agent("worker")
    async with running(claude_world.spec("worker", script)) as run:
        await run.runtime.push([note("FYI: main is green")], timeout_s=30)
        assert script.requests == []
        assert run.outcomes() == []
        assert run.runtime.active_turn_id is None
        script.add(Message("noted"))
        started = await run.runtime.start_turn(task("Anything new?"), None)
        assert (await run.outcome(started.turn_id)).final_text == "noted"
    assert len(script.requests) == 1
    history = script.requests[0].user_texts()
    assert any("wardian_inbox_delivery" in t and "FYI: main is green" in t for t in history)
    assert [s.active_turn_id for s in run.states() if s.status is AgentStatus.ACTIVE] == [started.turn_id]


async def test_a_task_steered_into_a_running_turn_is_folded_at_its_tool_boundary_and_shares_its_result(
        claude_world: ClaudeWorld) -> None:
    gate = Gate(ECHO)
    script = claude_world.model.agent("worker", gate, Message("both answered"))
    async with running(claude_world.spec("worker", script)) as run:
        runtime = run.runtime
        a = (await runtime.start_turn(task("first", "ask_a"), runtime.plan_message_id())).turn_id
        await gate.wait_reached()
        assert runtime.active_turn_id == a
        b = await runtime.steer(task("second, mid-turn", "ask_b"), a)
        assert b != a
        gate.open.set()
        outcomes = [await run.outcome(a), await run.outcome(b)]
    assert [(o.status, o.final_text) for o in outcomes] == [(OutcomeStatus.DONE, "both answered")] * 2
    assert len(script.requests) == 2
    assert "second, mid-turn" in sent_texts(script.requests[1])
    assert "second, mid-turn" not in sent_texts(script.requests[0])


async def test_a_steer_naming_a_turn_that_is_not_running_is_stale_and_sends_nothing(
        claude_world: ClaudeWorld) -> None:
    script = claude_world.model.agent("worker")
    async with running(claude_world.spec("worker", script)) as run:
        with pytest.raises(errors.StaleTurn):
            await run.runtime.steer(task("late"), "6b1f1501-b460-4f06-a68c-5c325013f243")
        with pytest.raises(errors.NotActive):
            await run.runtime.interrupt("6b1f1501-b460-4f06-a68c-5c325013f243")
    assert script.requests == []


async def test_three_tasks_queued_at_once_get_three_correlated_answers(claude_world: ClaudeWorld) -> None:
    """Messages queued behind a running turn run together as one turn: one result names all their uuids."""
    hold = Hold("first", text="first answer")
    script = claude_world.model.agent("worker", hold, Message("joint answer"))
    async with running(claude_world.spec("worker", script)) as run:
        runtime = run.runtime
        a = (await runtime.start_turn(task("one", "ask_1"), runtime.plan_message_id())).turn_id
        await anyio.to_thread.run_sync(hold.wait_started, 60.0)
        b = await runtime.steer(task("two", "ask_2"), a)
        c = await runtime.steer(task("three", "ask_3"), a)
        hold.release()
        got = {t: (await run.outcome(t)).final_text for t in (a, b, c)}
    assert got == {a: "first answer", b: "joint answer", c: "joint answer"}
    assert len(script.requests) == 2
    assert [s.active_turn_id for s in run.states() if s.status is AgentStatus.ACTIVE] == [a, b]


async def test_an_interrupt_ends_the_running_turn_as_interrupted_and_the_process_lives_on(
        claude_world: ClaudeWorld) -> None:
    hold = Hold("long work")
    script = claude_world.model.agent("worker", hold, Message("still here"))
    async with running(claude_world.spec("worker", script)) as run:
        runtime = run.runtime
        a = (await runtime.start_turn(task("long"), runtime.plan_message_id())).turn_id
        await anyio.to_thread.run_sync(hold.wait_started, 60.0)
        await runtime.interrupt(a)
        interrupted = await run.outcome(a)
        assert runtime.active_turn_id is None
        with pytest.raises(errors.NotActive):
            await runtime.interrupt(a)
        b = (await runtime.start_turn(task("next"), None)).turn_id
        after = await run.outcome(b)
    assert interrupted.status is OutcomeStatus.INTERRUPTED
    assert (after.status, after.final_text) == (OutcomeStatus.DONE, "still here")
    assert await anyio.to_thread.run_sync(hold.wait_finished, 30.0) == "disconnected"


async def test_a_new_runtime_resumes_the_same_session_and_the_model_sees_the_history(
        claude_world: ClaudeWorld) -> None:
    script = claude_world.model.agent("worker", Message("The code word is tangerine."))
    async with running(claude_world.spec("worker", script)) as first:
        session = first.runtime.thread_id
        await first.outcome((await first.runtime.start_turn(task("Remember a code word."), None)).turn_id)
    script.add(Message("It was tangerine."))
    async with running(claude_world.spec("worker", script, session_id=session)) as second:
        assert second.runtime.thread_id == session
        b = (await second.runtime.start_turn(task("What was it?", "ask_2"), None)).turn_id
        assert (await second.outcome(b)).final_text == "It was tangerine."
    assert "tangerine" in sent_texts(script.requests[-1])
    assert "Remember a code word." in sent_texts(script.requests[-1])


async def test_a_session_that_never_had_a_turn_starts_under_its_own_id(claude_world: ClaudeWorld) -> None:
    """A session id with no transcript yet (the agent was started, never given a message) cannot be resumed:
    Claude Code starts it fresh under that same id."""
    script = claude_world.model.agent("worker", Message("fresh"))
    async with running(claude_world.spec("worker", script)) as first:
        session = first.runtime.thread_id
    async with running(claude_world.spec("worker", script, session_id=session)) as second:
        b = (await second.runtime.start_turn(task("hello"), None)).turn_id
        assert (await second.outcome(b)).final_text == "fresh"
        assert second.runtime.thread_id == session


async def test_stopping_leaves_no_process_of_the_agent(claude_world: ClaudeWorld) -> None:
    script = claude_world.model.agent("worker", ECHO, Message("done"))
    spec = claude_world.spec("worker", script)
    async with running(spec) as run:
        await run.outcome((await run.runtime.start_turn(task("run a tool"), None)).turn_id)
        pid = int(spec.pid_path.read_text())
        assert psutil.pid_exists(pid)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not spec.pid_path.exists()
    leftovers = [p for p in psutil.process_iter(["environ"]) if (p.info.get("environ") or {}).get(
        "CLAUDE_CONFIG_DIR") == str(spec.config_dir)]
    assert leftovers == []


async def test_without_any_credential_the_runtime_does_not_start(claude_world: ClaudeWorld) -> None:
    script = claude_world.model.agent("worker")
    with pytest.raises(ExceptionGroup) as caught:  # the test's own task group wraps what `run` raised
        async with running(claude_world.spec("worker", script, key=None)):
            pass
    assert caught.group_contains(errors.NotSignedIn, match="run `wardian auth login claude --with-api-key`")
    assert script.requests == []


async def test_a_key_helper_in_the_agent_settings_counts_as_signed_in(claude_world: ClaudeWorld) -> None:
    script = claude_world.model.agent("worker", Message("helped"))
    spec = claude_world.spec("worker", script, key=None)
    (spec.config_dir / "settings.json").write_text(json.dumps({"apiKeyHelper": "echo sk-from-helper"}))
    async with running(spec) as run:
        a = (await run.runtime.start_turn(task("hi"), None)).turn_id
        assert (await run.outcome(a)).final_text == "helped"


async def test_a_refused_key_fails_the_turn_as_credentials_rejected(claude_world: ClaudeWorld) -> None:
    from wardian_harness.models.scripted_model import HttpError

    script = claude_world.model.agent("worker", HttpError(401, "invalid x-api-key"))
    async with running(claude_world.spec("worker", script)) as run:
        outcome = await run.outcome((await run.runtime.start_turn(task("hi"), None)).turn_id)
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.credentials_rejected
    assert "Invalid API key" in (outcome.error or "")



async def test_task_and_answer_texts_are_byte_exact_up_to_64_kib(claude_world: ClaudeWorld) -> None:
    """Unicode, newlines and a 65,536-byte task reach the model unchanged; the answer comes back unchanged."""
    unit = "☃ é\n\ttab \"quoted\" \\ \u2028 "
    text = (unit * 4000).encode()[:65536].decode("utf-8", "ignore")
    text += "x" * (65536 - len(text.encode()))
    assert len(text.encode()) == 65536
    answer = "réponse ☃\nligne deux\n" * 100
    script = claude_world.model.agent("worker", Message(answer))
    async with running(claude_world.spec("worker", script)) as run:
        outcome = await run.outcome((await run.runtime.start_turn(task(text), None)).turn_id)
    assert outcome.final_text == answer
    delivered = next(t for t in script.requests[0].user_texts() if t.startswith("wardian_task_delivery"))
    assert json.loads(delivered.split("\n", 1)[1])["text"] == text

