"""Pi's own bash, edit and write reach the app as approvals under an asking policy, through wardian's extension's
`tool_call` hook (docs/guide/approvals.md#pi): the real Pi CLI on the scripted model, prepared by the real
provider under `--approvals person`, whose runtime's events the test reads as the app would."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import pytest

from tests.conftest import pinned_npm_tool, short_home
from tests.providers.approvals_kit import World, task, the_expired_approval
from tests.providers.pi.conftest import REPO, PiApp
from wardian.approvals import MIN_TIMEOUT_MS
from wardian.home import Home
from wardian.providers.approvals import ApprovalAsked, Decision
from wardian.providers.base import LaunchSpec, OutcomeStatus, ProviderEvent, TurnOutcome
from wardian.providers.pi.provider import PiProvider
from wardian.providers.pi.runtime import PiRuntime
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.providers.pi_home import pi_settings


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("WARDIAN_PI", str(pinned_npm_tool(REPO / "node_modules" / ".bin" / "pi", "Pi CLI")))
    root = short_home("wpa")
    with ScriptedModel() as model:
        w = World(root, model.agent("worker"))
        for sub in ("ws", "agent", "home"):
            (root / sub).mkdir(mode=0o700)
        try:
            yield w
        finally:
            shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def running(world: World, policy: str = "person") -> AsyncIterator[PiRuntime]:
    provider = PiProvider()
    spec = LaunchSpec(name="worker", uuid="u-worker", agent_dir=world.root / "agent", workspace=world.workspace,
                      mode="background", overrides=tuple(pi_settings(world.script.base_url)), approve_tools=(),
                      home=Home(world.root / "home"), session="unused", thread_id=None,
                      log_path=world.root / "pi.log", pid_path=world.root / "pi.pid", approvals=policy)
    runtime = await provider.prepare(spec, await provider.probe())
    async with runtime.events, anyio.create_task_group() as tg:
        await tg.start(runtime.run)
        try:
            yield runtime
        finally:
            runtime.stop()


async def events_until(runtime: PiRuntime, kind: type[ProviderEvent]) -> list[ProviderEvent]:
    """The events up to the first `kind` (bounded)."""
    seen: list[ProviderEvent] = []
    with anyio.fail_after(60):
        async for event in runtime.events:
            seen.append(event)
            if isinstance(event, kind):
                return seen
    raise AssertionError(f"the runtime ended before a {kind.__name__}")


def test_an_allowed_command_runs_and_a_denied_one_is_blocked_and_the_model_is_told(world: World) -> None:
    """The extension's confirmation of Pi's bash becomes one approval with the command and the workspace. Allowing it
    runs the command; denying it blocks the call, and the model reads that it was denied."""
    made = world.workspace / "made"
    world.script.add(world.touch(), Message("made it"), world.touch(), Message("could not"))

    async def turn(runtime: PiRuntime, rid: str, decision: Decision) -> TurnOutcome:
        started = await runtime.start_turn(task(rid))
        asked = (await events_until(runtime, ApprovalAsked))[-1]
        assert isinstance(asked, ApprovalAsked)
        assert (asked.ask.turn_id, asked.ask.kind, asked.ask.tool) == (started.turn_id, "command", "bash")
        assert asked.ask.summary == f"run `touch {made}` in {world.workspace}"
        assert not made.exists()
        assert asked.reply.answer(decision)
        outcome = (await events_until(runtime, TurnOutcome))[-1]
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
    assert "Permission denied: bash was not approved" in world.script.requests[-1].function_call_outputs()[-1].text



def test_an_approval_nobody_answers_expires_and_pi_is_refused(pi_app: PiApp) -> None:
    """Through a real app, the deadline passes (the shortest a start takes): the approval ends `expired` by
    `deadline`, the extension's confirmation is refused, the command never runs, the model is told, and the task
    ends."""
    world = pi_app
    _, lead = world.app.add_agent("lead")
    worker, _, script = world.agent("worker", start=False)
    world.app.call("agent/start", {"agent": "worker", "approvals": "person", "approval_timeout_ms": MIN_TIMEOUT_MS,
                                   "config": pi_settings(script.base_url)}, timeout_s=300)
    made = world.app.home.default_workspace(worker["uuid"]) / "made"
    script.add(ToolCall("bash", {"command": f"touch {made}"}, namespace=None), Message("could not"))
    sent = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make a file"})
    replies = world.app.records_for(lead)
    assert [(r["request_id"], r["status"], r["text"]) for r in replies] == [(sent["request_id"], "done", "could not")]
    assert not made.exists()
    the_expired_approval(world.app, "worker", sent["request_id"])
    assert "Permission denied: bash was not approved" in script.requests[-1].function_call_outputs()[-1].text
