"""Claude Code's permission requests reach the app as approvals, and its decision reaches Claude Code
(docs/guide/approvals.md#claude-code): the real Claude Code CLI on the scripted model, started with
`--permission-prompt-tool stdio`, driven by the real runtime, whose events the test reads as the app would."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.providers.approvals_kit import the_expired_approval
from tests.providers.claude.conftest import ClaudeApp, ClaudeWorld, records_for, running, settle
from wardian.app.runtime.approvals import EXPIRED
from wardian.approvals import MIN_TIMEOUT_MS
from wardian.model import Party
from wardian.providers.approvals import ApprovalAsked, Decision
from wardian.providers.base import OutcomeStatus, TaskDelivery
from wardian.providers.claude.spec import ClaudeSpec
from wardian_harness.models.scripted_model import AgentScript, Message, ToolCall
from wardian_harness.providers.claude_home import ScriptedClaude, claude_overrides

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


# --- through the app: a person answers with `wardian approval allow|deny` -------------------------------------------


def pending_approval(world: ClaudeApp, agent: str) -> dict[str, Any]:
    """The agent's one pending approval, once the app shows it (bounded poll of `approval/list`)."""
    for _ in range(1200):
        found = [a for a in world.app.call("approval/list", {})["approvals"] if a["agent"]["name"] == agent]
        if found:
            assert len(found) == 1, found
            return dict(found[0])
        settle()
    raise AssertionError(f"no approval of {agent} appeared")


def test_a_person_allows_then_denies_a_claude_code_workers_command_through_the_app(claude_app: ClaudeApp) -> None:
    """The issue's person path on a real app: the worker's command waits as a pending `apr_` approval tied to its
    task; `wardian approval allow` runs it and the task's reply is `done`; `wardian approval deny --reason` keeps the
    next one from running, and the model reads the reason."""
    world = claude_app
    _, lead = world.app.add_agent("lead")
    worker, _, script = world.agent("worker", start=False)
    world.app.call("agent/start", {"agent": "worker", "approvals": "person", "config": [
        *claude_overrides(ScriptedClaude(script.base_url))]}, timeout_s=300)
    made = world.app.home.default_workspace(worker["uuid"]) / "made"
    script.add(touch(made), Message("made it"), touch(made), Message("could not"))

    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make a file"})
    asked = pending_approval(world, "worker")
    assert (asked["request_id"], asked["kind"], asked["tool"], asked["status"]) == (
        first["request_id"], "command", "Bash", "pending")
    assert asked["detail"]["command"] == f"touch {made}"
    assert not made.exists()
    assert world.app.cli("approval", "allow", asked["approval_id"]).returncode == 0
    replies = records_for(world, lead)
    assert [(r["request_id"], r["status"], r["text"]) for r in replies] == [(first["request_id"], "done", "made it")]
    assert made.exists()
    made.unlink()

    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make it again"})
    asked = pending_approval(world, "worker")
    assert asked["request_id"] == second["request_id"]
    assert world.app.cli("approval", "deny", asked["approval_id"], "--reason", "not on a Friday").returncode == 0
    replies = records_for(world, lead)
    assert [(r["request_id"], r["status"], r["text"]) for r in replies] == [(second["request_id"], "done", "could not")]
    assert not made.exists()
    assert "not on a Friday" in script.requests[-1].function_call_outputs()[-1].text
    ended = world.app.call("approval/show", {"approval_id": asked["approval_id"]})
    assert (ended["status"], ended["reason"]) == ("denied", "not on a Friday")


async def test_a_command_carrying_the_agents_key_is_asked_with_the_key_redacted(claude_world: ClaudeWorld) -> None:
    """An approval is kept and shown to people: the agent's key the model wrote into a command never reaches it
    (docs/guide/approvals.md#secrets)."""
    script = claude_world.model.agent("worker")
    spec = asking_spec(claude_world, script)
    key = spec.env["ANTHROPIC_API_KEY"]
    script.add(ToolCall("Bash", {"command": f"touch {key}", "description": "Make a file"}, namespace=None),
               Message("refused"))
    async with running(spec) as run:
        started = await run.runtime.start_turn(task("print your key"), None)
        await run.until(lambda es: any(isinstance(e, ApprovalAsked) for e in es))
        asked = next(e for e in run.events if isinstance(e, ApprovalAsked))
        assert key not in repr(asked.ask)
        assert asked.ask.summary == f"run `touch [redacted]` in {spec.workspace}"
        assert asked.reply.answer(Decision(allow=False))
        await run.outcome(started.turn_id)


def test_an_allow_rule_runs_its_command_without_asking_and_the_policy_denies_the_rest(claude_app: ClaudeApp) -> None:
    """`--allow 'Bash(touch *)'` under the default `deny`: Claude Code asks (a rule turns its prompt tool on), the
    touch is allowed by `rule` before any routing and runs, the mkdir no rule matches is denied by the policy; both
    are recorded. A rule that is not one is refused naming it, and changes nothing
    (docs/guide/approvals.md#allow-rules)."""
    world = claude_app
    _, lead = world.app.add_agent("lead")
    worker, _, script = world.agent("worker", start=False)
    refused = world.app.cli("agent", "start", "worker", "--allow", "Bash(touch")
    assert refused.returncode == 2
    assert b"invalid_arguments" in refused.stderr
    assert b"'Bash(touch'" in refused.stderr
    assert world.app.call("agent/list", {})["managed"][worker["uuid"]]["allow"] == []
    world.app.call("agent/start", {"agent": "worker", "allow": ["Bash(touch *)"], "config": [
        *claude_overrides(ScriptedClaude(script.base_url))]}, timeout_s=300)
    made, other = (world.app.home.default_workspace(worker["uuid"]) / n for n in ("made", "other"))
    script.add(touch(made), ToolCall("Bash", {"command": f"mkdir {other}", "description": "Make a dir"},
                                     namespace=None), Message("made one"))

    sent = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make a file"})
    replies = records_for(world, lead)
    assert [(r["request_id"], r["status"], r["text"]) for r in replies] == [(sent["request_id"], "done", "made one")]
    assert made.exists()
    assert not other.exists()
    ended = world.app.call("approval/list", {"pending": False})["approvals"]
    assert sorted((a["detail"]["command"], a["status"], a["decided_by"], a["reason"], a["request_id"])
                  for a in ended) == [
        (f"mkdir {other}", "denied", "policy", "the agent's approval policy is deny: nobody may approve this",
         sent["request_id"]),
        (f"touch {made}", "allowed", "rule", "allowed by rule Bash(touch *)", sent["request_id"])]
    assert world.app.call("agent/list", {})["managed"][worker["uuid"]]["allow"] == ["Bash(touch *)"]


def test_an_approval_nobody_answers_expires_and_claude_code_is_denied(claude_app: ClaudeApp) -> None:
    """The deadline passes (the shortest a start takes): the approval ends `expired` by `deadline`, Claude Code is
    answered deny with the reason, the command never runs, and the task ends with the model's answer."""
    world = claude_app
    _, lead = world.app.add_agent("lead")
    worker, _, script = world.agent("worker", start=False)
    world.app.call("agent/start", {"agent": "worker", "approvals": "person", "approval_timeout_ms": MIN_TIMEOUT_MS,
                                   "config": [*claude_overrides(ScriptedClaude(script.base_url))]}, timeout_s=300)
    made = world.app.home.default_workspace(worker["uuid"]) / "made"
    script.add(touch(made), Message("could not"))
    sent = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make a file"})
    replies = records_for(world, lead)
    assert [(r["request_id"], r["status"], r["text"]) for r in replies] == [(sent["request_id"], "done", "could not")]
    assert not made.exists()
    the_expired_approval(world.app, "worker", sent["request_id"])
    assert EXPIRED in script.requests[-1].function_call_outputs()[-1].text
