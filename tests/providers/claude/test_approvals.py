"""Claude Code's permission requests reach the app as approvals, and its decision reaches Claude Code
(docs/guide/approvals.md#claude-code): the real Claude Code CLI on the scripted model, started with
`--permission-prompt-tool stdio`, driven by the real runtime, whose events the test reads as the app would."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.providers.claude.conftest import ClaudeWorld, running
from wardian.model import Party
from wardian.providers.approvals import ApprovalAsked, Decision
from wardian.providers.base import OutcomeStatus, TaskDelivery
from wardian.providers.claude.spec import ClaudeSpec
from wardian_harness.models.scripted_model import AgentScript, Message, ToolCall

pytestmark = pytest.mark.anyio

LEAD = Party(name="lead", uuid="00000000-0000-4000-8000-000000000001")


def asking_spec(world: ClaudeWorld, script: AgentScript) -> ClaudeSpec:
    """The spec `prepare` builds under `--approvals person`."""
    return dataclasses.replace(world.spec("worker", script), permission_prompt=True)


def touch(path: Path) -> ToolCall:
    return ToolCall("Bash", {"command": f"touch {path}", "description": "Make a file"}, namespace=None)


def task(text: str) -> TaskDelivery:
    return TaskDelivery(request_id="ask_1", sender=LEAD, text=text)


async def test_an_allowed_bash_command_runs_and_the_turn_ends_with_the_models_answer(
        claude_world: ClaudeWorld) -> None:
    """`can_use_tool` for Bash becomes one approval with the command and the workspace; allowing it runs it."""
    script = claude_world.model.agent("worker")
    spec = asking_spec(claude_world, script)
    made = spec.workspace / "made"
    script.add(touch(made), Message("made it"))
    async with running(spec) as run:
        started = await run.runtime.start_turn(task("make a file"), None)
        await run.until(lambda es: any(isinstance(e, ApprovalAsked) for e in es))
        asked = next(e for e in run.events if isinstance(e, ApprovalAsked))
        ask = asked.ask
        assert (ask.turn_id, ask.kind, ask.tool) == (started.turn_id, "command", "Bash")
        assert ask.summary == f"run `touch {made}` in {spec.workspace}"
        assert ask.detail["command"] == f"touch {made}"
        assert not made.exists()
        assert asked.reply.answer(Decision(allow=True))
        outcome = await run.outcome(started.turn_id)
    assert (outcome.status, outcome.final_text) == (OutcomeStatus.DONE, "made it")
    assert made.exists()


async def test_a_denied_bash_command_does_not_run_and_the_model_reads_the_reason(claude_world: ClaudeWorld) -> None:
    """Deny: Claude Code is answered `deny` with the reason as its message, which the model reads as the tool's
    result; the command never runs."""
    script = claude_world.model.agent("worker")
    spec = asking_spec(claude_world, script)
    made = spec.workspace / "made"
    script.add(touch(made), Message("could not"))
    async with running(spec) as run:
        started = await run.runtime.start_turn(task("make a file"), None)
        await run.until(lambda es: any(isinstance(e, ApprovalAsked) for e in es))
        asked = next(e for e in run.events if isinstance(e, ApprovalAsked))
        assert asked.reply.answer(Decision(allow=False, reason="not on a Friday"))
        outcome = await run.outcome(started.turn_id)
    assert (outcome.status, outcome.final_text) == (OutcomeStatus.DONE, "could not")
    assert not made.exists()
    told = script.requests[-1].function_call_outputs()[-1].text
    assert "not on a Friday" in told


async def test_an_approval_whose_turn_is_interrupted_is_withdrawn_and_nothing_runs(
        claude_world: ClaudeWorld) -> None:
    """The turn that asked is interrupted: Claude Code takes its request back, the approval is withdrawn, and a later
    answer changes nothing."""
    script = claude_world.model.agent("worker")
    spec = asking_spec(claude_world, script)
    made = spec.workspace / "made"
    script.add(touch(made), Message("unused"))
    async with running(spec) as run:
        started = await run.runtime.start_turn(task("make a file"), None)
        await run.until(lambda es: any(isinstance(e, ApprovalAsked) for e in es))
        asked = next(e for e in run.events if isinstance(e, ApprovalAsked))
        await run.runtime.interrupt(started.turn_id)
        outcome = await run.outcome(started.turn_id)
        assert outcome.status is not OutcomeStatus.DONE
        assert await asked.reply.wait() is None
        assert not asked.reply.answer(Decision(allow=True))
    assert not made.exists()


async def test_without_an_asking_policy_claude_code_refuses_by_itself_and_nothing_is_asked(
        claude_world: ClaudeWorld) -> None:
    """`deny` (no permission prompt tool): Claude Code refuses the command itself, as before."""
    script = claude_world.model.agent("worker")
    spec = claude_world.spec("worker", script)
    made = spec.workspace / "made"
    script.add(touch(made), Message("refused"))
    async with running(spec) as run:
        started = await run.runtime.start_turn(task("make a file"), None)
        assert (await run.outcome(started.turn_id)).final_text == "refused"
    assert not any(isinstance(e, ApprovalAsked) for e in run.events)
    assert not made.exists()
