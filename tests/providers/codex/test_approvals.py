"""Codex's approval requests reach the app as approvals, and its decision reaches Codex
(docs/guide/approvals.md#codex): the real Codex app-server on the scripted model, driven by the real
runtime, whose events the test reads as the app would."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import short_home
from tests.providers.approvals_kit import next_event
from tests.providers.codex.conftest import CodexWorld, codex_or_skip
from tests.providers.codex.test_runtime import wait_reply
from wardian.app.runtime.approvals import EXPIRED
from wardian.approvals import MIN_TIMEOUT_MS
from wardian.model import Party
from wardian.protocol import methods as proto
from wardian.providers.approvals import ApprovalAsked, Decision
from wardian.providers.base import OutcomeStatus, TaskDelivery, TurnOutcome
from wardian.providers.codex import approvals
from wardian.providers.codex.compat import capabilities, parse_codex_version
from wardian.providers.codex.launch import AppServerSpec, app_server_env, codex_version
from wardian.providers.codex.runtime import CodexRuntime
from wardian_harness.models.scripted_model import AgentScript, Message, ScriptedModel, ToolCall
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides, write_codex_config

KEY_VARIABLE = "WARDIAN_SCRIPTED_MODEL_KEY"


@dataclass
class World:
    root: Path
    script: AgentScript
    codex: Path

    @property
    def workspace(self) -> Path:
        return self.root / "ws"


def escalated(command: str) -> ToolCall:
    """The model asks to run `command` outside the sandbox, as a model does under `on-request`."""
    return ToolCall("exec_command", {"cmd": command, "sandbox_permissions": "require_escalated",
                                     "justification": "make a file"}, namespace=None)


@pytest.fixture
def world() -> Iterator[World]:
    codex = codex_or_skip()
    root = short_home("wca")
    with ScriptedModel() as model:
        w = World(root, model.agent("worker"), codex)
        w.workspace.mkdir()
        try:
            yield w
        finally:
            shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def running(world: World, policy: str = "person") -> AsyncIterator[CodexRuntime]:
    """The agent's runtime as the provider prepares it under `policy` (the agent's own settings say `never`, as the
    tests' scripted settings do), running until the block ends."""
    home = world.root / "codex"
    write_codex_config(home, ScriptedProvider(base_url=world.script.base_url))
    overrides = ('approval_policy="never"', 'sandbox_mode="read-only"')
    version = parse_codex_version(await anyio.to_thread.run_sync(codex_version, str(world.codex)))
    runtime = CodexRuntime(AppServerSpec(
        name="worker", codex=str(world.codex), codex_home=home, workspace=world.workspace,
        overrides=(*overrides, *approvals.launch_overrides(policy, overrides)),
        env={**app_server_env(home), KEY_VARIABLE: "dummy-key"}, thread_id=None,
        capabilities=capabilities(version), stderr_path=world.root / "codex.log"))
    async with runtime.events, anyio.create_task_group() as tg:
        await tg.start(runtime.run)
        try:
            yield runtime
        finally:
            runtime.stop()


def task(text: str) -> TaskDelivery:
    return TaskDelivery("ask_1", Party("lead", "u-lead"), text)


def test_an_allowed_command_runs_and_the_turn_ends_with_the_models_answer(world: World) -> None:
    """A command Codex asks to run becomes one approval with the command and its directory; allowing it runs it."""
    made = world.workspace / "made"
    world.script.add(escalated(f"touch {made}"), Message("made it"))

    async def main() -> None:
        async with running(world) as runtime:
            started = await runtime.start_turn(task("make a file"))
            asked = await next_event(runtime, ApprovalAsked)
            assert isinstance(asked, ApprovalAsked)
            ask = asked.ask
            assert (ask.turn_id, ask.kind, ask.tool) == (started.turn_id, "command", "shell")
            assert f"touch {made}" in ask.detail["command"]
            assert ask.detail["cwd"] == str(world.workspace)
            assert ask.summary == f"run `{ask.detail['command']}` in {world.workspace}"
            assert {o.kind for o in ask.options} >= {"allow_once", "reject_once"}
            assert not made.exists()
            assert asked.reply.answer(Decision(allow=True))
            outcome = await next_event(runtime, TurnOutcome)
            assert isinstance(outcome, TurnOutcome)
            assert (outcome.status, outcome.final_text) == (OutcomeStatus.DONE, "made it")

    anyio.run(main)
    assert made.exists()
    assert "Process exited with code 0" in world.script.requests[-1].function_call_outputs()[-1].text


def test_a_denied_command_does_not_run_and_the_model_is_told(world: World) -> None:
    """Deny: Codex is answered `decline`, the command never runs, and the model reads that it was rejected."""
    made = world.workspace / "made"
    world.script.add(escalated(f"touch {made}"), Message("could not"))

    async def main() -> None:
        async with running(world) as runtime:
            await runtime.start_turn(task("make a file"))
            asked = await next_event(runtime, ApprovalAsked)
            assert isinstance(asked, ApprovalAsked)
            assert asked.reply.answer(Decision(allow=False, reason="not today"))
            outcome = await next_event(runtime, TurnOutcome)
            assert isinstance(outcome, TurnOutcome)
            assert (outcome.status, outcome.final_text) == (OutcomeStatus.DONE, "could not")

    anyio.run(main)
    assert not made.exists()
    assert "rejected by user" in world.script.requests[-1].function_call_outputs()[-1].text


def test_an_approval_whose_turn_is_interrupted_is_withdrawn_and_nothing_runs(world: World) -> None:
    """The turn that asked ends first (interrupted): the approval is withdrawn, and a later answer changes nothing."""
    made = world.workspace / "made"
    world.script.add(escalated(f"touch {made}"), Message("unused"))

    async def main() -> None:
        async with running(world) as runtime:
            started = await runtime.start_turn(task("make a file"))
            asked = await next_event(runtime, ApprovalAsked)
            assert isinstance(asked, ApprovalAsked)
            await runtime.interrupt(started.turn_id)
            outcome = await next_event(runtime, TurnOutcome)
            assert isinstance(outcome, TurnOutcome)
            assert outcome.status is OutcomeStatus.INTERRUPTED
            assert not asked.reply.open
            assert await asked.reply.wait() is None
            assert not asked.reply.answer(Decision(allow=True))

    anyio.run(main)
    assert not made.exists()


def test_an_approval_open_when_the_runtime_stops_is_withdrawn(world: World) -> None:
    """The provider's process goes away with a request open: the approval is withdrawn, never left pending."""
    world.script.add(escalated(f"touch {world.workspace / 'made'}"), Message("unused"))

    async def main() -> None:
        async with running(world) as runtime:
            await runtime.start_turn(task("make a file"))
            asked = await next_event(runtime, ApprovalAsked)
            assert isinstance(asked, ApprovalAsked)
        assert await asked.reply.wait() is None

    anyio.run(main)
    assert not (world.workspace / "made").exists()


def test_the_asking_policies_turn_codex_approvals_on_and_deny_keeps_the_agents_own() -> None:
    """`person` and `lead` run Codex with `on-request` unless the agent's own settings chose a policy that asks;
    `deny` adds nothing (Codex 0.171.0 refuses `untrusted`, so on-request is the one that asks)."""
    assert approvals.launch_overrides("person", ()) == ('approval_policy="on-request"',)
    assert approvals.launch_overrides("lead", ('approval_policy="never"',)) == ('approval_policy="on-request"',)
    assert approvals.launch_overrides("person", ("approval_policy=on-failure",)) == ()
    assert approvals.launch_overrides("deny", ()) == ()


def pending_approval(world: CodexWorld, agent: str) -> dict[str, Any]:
    """The agent's one pending approval, once the app shows it (bounded: 600 waits of 100 ms on a mailbox)."""
    _, idle = world.app.add_agent()
    for _ in range(600):
        found = [a for a in world.app.call("approval/list", {})["approvals"] if a["agent"]["name"] == agent]
        if found:
            assert len(found) == 1, found
            return dict(found[0])
        world.app.call("mailbox/wait", {"session": idle, "timeout_ms": 100})
    raise AssertionError(f"no approval of {agent} appeared")


def test_a_person_allows_then_denies_a_codex_workers_command_through_the_app(codex_world: CodexWorld) -> None:
    """Through a real app: `--approvals person` runs the worker's Codex on-request over the agent's own `never`; its
    command waits as a pending approval of the task; `wardian approval allow` runs it (reply `done`), `wardian approval
    deny` does not, and the model reads that it was rejected."""
    world = codex_world
    _, lead = world.app.add_agent("lead")
    worker, _, script = world.agent("worker", start=False)
    world.app.call("agent/start", {"agent": "worker", "approvals": "person",
                                   "config": codex_overrides(ScriptedProvider(base_url=script.base_url))},
                   timeout_s=300)
    workspace = world.app.home.default_workspace(worker["uuid"])
    made = workspace / "made"
    script.add(escalated(f"touch {made}"), Message("made it"), escalated(f"touch {made}"), Message("could not"))

    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make a file"})
    asked = pending_approval(world, "worker")
    assert (asked["request_id"], asked["kind"], asked["status"]) == (first["request_id"], "command", "pending")
    assert asked["detail"]["cwd"] == str(workspace)
    # The approval methods' results as declared (tests/providers/codex/test_method_results.py lists them here).
    for method, params in (("approval/list", {}), ("approval/show", {"approval_id": asked["approval_id"]})):
        proto.validate_result(method, world.app.call(method, params))
    assert world.app.cli("approval", "allow", asked["approval_id"]).returncode == 0
    assert [(r["request_id"], r["status"], r["text"]) for r in wait_reply(world, lead)] == [
        (first["request_id"], "done", "made it")]
    assert made.exists()
    made.unlink()

    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "again"})
    asked = pending_approval(world, "worker")
    denied = world.app.call("approval/answer", {"approval_id": asked["approval_id"], "decision": "deny"})
    proto.validate_result("approval/answer", denied)
    assert denied["status"] == "denied"
    assert [(r["request_id"], r["status"], r["text"]) for r in wait_reply(world, lead)] == [
        (second["request_id"], "done", "could not")]
    assert not made.exists()
    assert "rejected by user" in script.requests[-1].function_call_outputs()[-1].text


def test_a_rule_allows_a_codex_command_and_one_nobody_answers_expires(codex_world: CodexWorld) -> None:
    """One Codex worker, `--approvals person --approval-timeout 1 --allow 'Bash(touch *)'`: the escalated `touch`
    (Codex reports it as `bash -lc '…'`) is allowed by the rule without anyone asked and runs; the `mkdir` no rule
    matches waits until its deadline, ends `expired`, Codex is declined, it never runs, and the task ends."""
    world = codex_world
    _, lead = world.app.add_agent("lead")
    worker, _, script = world.agent("worker", start=False)
    world.app.call("agent/start", {"agent": "worker", "approvals": "person", "approval_timeout_ms": MIN_TIMEOUT_MS,
                                   "allow": ["Bash(touch *)"],
                                   "config": codex_overrides(ScriptedProvider(base_url=script.base_url))},
                   timeout_s=300)
    made, other = (world.app.home.default_workspace(worker["uuid"]) / n for n in ("made", "other"))
    script.add(escalated(f"touch {made}"), Message("made it"), escalated(f"mkdir {other}"), Message("could not"))

    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make a file"})
    assert [(r["request_id"], r["status"], r["text"]) for r in wait_reply(world, lead)] == [
        (first["request_id"], "done", "made it")]
    assert made.exists()
    (allowed,) = world.app.call("approval/list", {"pending": False})["approvals"]
    assert (allowed["request_id"], allowed["status"], allowed["decided_by"], allowed["reason"]) == (
        first["request_id"], "allowed", "rule", "allowed by rule Bash(touch *)")

    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "make a dir"})
    assert [(r["request_id"], r["status"], r["text"]) for r in wait_reply(world, lead)] == [
        (second["request_id"], "done", "could not")]
    assert not other.exists()
    ended = [a for a in world.app.call("approval/list", {"pending": False})["approvals"]
             if a["request_id"] == second["request_id"]]
    assert [(a["status"], a["decided_by"], a["reason"]) for a in ended] == [("expired", "deadline", EXPIRED)]
    assert "rejected by user" in script.requests[-1].function_call_outputs()[-1].text


def patch(path: Path, text: str) -> ToolCall:
    """The model edits a file the way Codex's models do: `apply_patch` with a patch, which Codex applies itself (a
    file change, not a command), asking first where the sandbox does not let it write."""
    body = f"*** Begin Patch\n*** Add File: {path}\n+{text}\n*** End Patch\n"
    return ToolCall("exec_command", {"cmd": f"apply_patch <<'EOF'\n{body}EOF\n"}, namespace=None)


def test_a_file_change_codex_asks_for_is_allowed_then_denied(world: World) -> None:
    """`item/fileChange/requestApproval`: one approval with the file and its `+/-` count. Allowed, Codex writes the
    file; denied (`decline`), it does not, and the model reads that it was rejected; the turn goes on each time."""
    made = world.workspace / "made.txt"
    world.script.add(patch(made, "hello"), Message("wrote it"), patch(made, "again"), Message("could not"))

    async def turn(runtime: CodexRuntime, decision: Decision) -> TurnOutcome:
        started = await runtime.start_turn(task("write a file"))
        asked = await next_event(runtime, ApprovalAsked)
        assert isinstance(asked, ApprovalAsked)
        ask = asked.ask
        assert (ask.turn_id, ask.kind, ask.tool) == (started.turn_id, "file_change", "apply_patch")
        assert ask.detail["files"] == [str(made)]
        assert ask.detail["diff_summary"] == "+1 -0"
        assert asked.reply.answer(decision)
        outcome = await next_event(runtime, TurnOutcome)
        assert isinstance(outcome, TurnOutcome)
        return outcome

    async def main() -> None:
        async with running(world) as runtime:
            allowed = await turn(runtime, Decision(allow=True))
            assert (allowed.status, allowed.final_text) == (OutcomeStatus.DONE, "wrote it")
            assert made.read_text(encoding="utf-8") == "hello\n"
            made.unlink()
            denied = await turn(runtime, Decision(allow=False))
            assert (denied.status, denied.final_text) == (OutcomeStatus.DONE, "could not")

    anyio.run(main)
    assert not made.exists()
    assert "rejected by user" in world.script.requests[-1].function_call_outputs()[-1].text
