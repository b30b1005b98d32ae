"""OpenCode's permission requests reach the app as approvals, and its decision reaches OpenCode
(docs/guide/approvals.md#opencode): the real `opencode serve` on the scripted model, prepared by the real
provider under `--approvals person`, whose runtime's events the test reads as the app would."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import pytest

from tests.conftest import short_home
from tests.providers.approvals_kit import World, next_event, task, the_expired_approval
from tests.providers.opencode.conftest import MixedWorld, opencode_or_skip
from wardian.app.runtime.approvals import EXPIRED
from wardian.approvals import MIN_TIMEOUT_MS
from wardian.home import Home
from wardian.providers.approvals import ApprovalAsked, Decision
from wardian.providers.base import LaunchSpec, OutcomeStatus, TurnOutcome
from wardian.providers.opencode import approvals
from wardian.providers.opencode.provider import OpenCodeProvider
from wardian.providers.opencode.runtime import OpenCodeRuntime
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.providers.opencode_home import ScriptedOpenCode, opencode_overrides


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("WARDIAN_OPENCODE", str(opencode_or_skip()))
    root = short_home("woa")
    with ScriptedModel() as model:
        w = World(root, model.agent("worker"))
        for sub in ("ws", "agent", "home"):
            (root / sub).mkdir(mode=0o700)
        try:
            yield w
        finally:
            shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def running(world: World) -> AsyncIterator[OpenCodeRuntime]:
    provider = OpenCodeProvider()
    spec = LaunchSpec(name="worker", uuid="u-worker", agent_dir=world.root / "agent", workspace=world.workspace,
                      mode="background", overrides=tuple(opencode_overrides(ScriptedOpenCode(world.script.base_url))),
                      approve_tools=(), home=Home(world.root / "home"), session="unused", thread_id=None,
                      log_path=world.root / "serve.log", pid_path=world.root / "serve.pid", approvals="person")
    runtime = await provider.prepare(spec, await provider.probe())
    async with runtime.events, anyio.create_task_group() as tg:
        await tg.start(runtime.run)
        try:
            yield runtime
        finally:
            runtime.stop()


def test_an_allowed_command_runs_and_a_denied_one_does_not_and_the_model_reads_why(world: World) -> None:
    """`permission.asked` for bash becomes one approval with the command and the workspace. Allowing it (`once`)
    runs the command; denying it replies `reject` with the reason as its message, which the model reads, and the
    loop goes on. Both on one serve (OpenCode takes long to start on a loaded machine)."""
    made = world.workspace / "made"
    world.script.add(world.touch("Make a file"), Message("made it"), world.touch("Make a file"), Message("could not"))

    async def turn(runtime: OpenCodeRuntime, rid: str, decision: Decision) -> TurnOutcome:
        started = await runtime.start_turn(task(rid))
        asked = await next_event(runtime, ApprovalAsked)
        assert isinstance(asked, ApprovalAsked)
        assert (asked.ask.turn_id, asked.ask.kind, asked.ask.tool) == (started.turn_id, "command", "bash")
        assert asked.ask.summary == f"run `touch {made}` in {world.workspace}"
        assert not made.exists()
        assert asked.reply.answer(decision)
        outcome = await next_event(runtime, TurnOutcome)
        assert isinstance(outcome, TurnOutcome)
        return outcome

    async def main() -> None:
        async with running(world) as runtime:
            allowed = await turn(runtime, "ask_1", Decision(allow=True))
            assert (allowed.status, allowed.final_text) == (OutcomeStatus.DONE, "made it")
            assert made.exists()
            made.unlink()
            denied = await turn(runtime, "ask_2", Decision(allow=False, reason="not on a Friday"))
            assert (denied.status, denied.final_text) == (OutcomeStatus.DONE, "could not")

    anyio.run(main)
    assert not made.exists()
    assert "not on a Friday" in world.script.requests[-1].function_call_outputs()[-1].text


def test_an_asking_policy_asks_only_where_the_agents_own_permission_settings_are_silent() -> None:
    """The agent's own `permission` rules decide without asking; `deny` changes nothing."""
    assert json.loads(approvals.permission_env("person", "")[approvals.ENV_PERMISSION]) == {"bash": "ask",
                                                                                            "edit": "ask"}
    own = '{ // the agent\'s own\n "permission": { "bash": { "git status": "allow", "*": "ask" } } }'
    assert json.loads(approvals.permission_env("lead", own)[approvals.ENV_PERMISSION]) == {"edit": "ask"}
    assert approvals.permission_env("person", '{"permission": "allow"}') == {}
    assert approvals.permission_env("deny", "") == {}


def test_an_approval_nobody_answers_expires_and_opencode_is_denied(mixed_world: MixedWorld) -> None:
    """Through a real app, the deadline passes (the shortest a start takes): the approval ends `expired` by
    `deadline`, OpenCode is replied `reject` with the reason, which the model reads; the command never runs and the
    task ends."""
    world = mixed_world
    _, lead = world.app.add_agent("lead")
    worker, _, script = world.agent("worker", start=False)
    world.app.call("agent/start", {"agent": "worker", "approvals": "person", "approval_timeout_ms": MIN_TIMEOUT_MS,
                                   "config": opencode_overrides(ScriptedOpenCode(script.base_url))}, timeout_s=300)
    made = world.app.home.default_workspace(worker["uuid"]) / "made"
    script.add(ToolCall("bash", {"command": f"touch {made}", "description": "Make a file"}, namespace=None),
               Message("could not"))
    sent = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make a file"})
    replies = world.app.records_for(lead)
    assert [(r["request_id"], r["status"], r["text"]) for r in replies] == [(sent["request_id"], "done", "could not")]
    assert not made.exists()
    the_expired_approval(world.app, "worker", sent["request_id"])
    assert EXPIRED in script.requests[-1].function_call_outputs()[-1].text
