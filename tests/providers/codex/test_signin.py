"""Codex sign-in with an API key, against the real Codex and the scripted model (docs/providers/codex.md#sign-in):
the key reaches the model as the exact Bearer and nowhere else, a start that is not signed in is refused before
anything runs, and a 401 ends its turn at once as `credentials_rejected`.

These drive the Codex provider itself (`prepare`, then the runtime) with the credentials a launch would carry; the
app's side (the failed notice, `signed_out`, the CLI's exit code) is in test_signin_app.py.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tests.providers.codex.conftest import codex_or_skip
from wardian import errors
from wardian.auth.model import Credential, CredentialKind
from wardian.home import Home
from wardian.model import Party
from wardian.providers.base import LaunchSpec, OutcomeStatus, TaskDelivery, TurnOutcome
from wardian.providers.codex.compat import ENV_CODEX
from wardian.providers.codex.provider import CodexProvider
from wardian.providers.codex.runtime import CodexRuntime
from wardian_harness.models.scripted_model import AgentScript, Message, ScriptedModel
from wardian_harness.processes.apps import fresh_home
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides
from wardian_harness.secrets import assert_secrets_absent

KEY_WORK = "sk-test-work-4f1c9a2b7d3e8f60"
KEY_HOME = "sk-test-home-0b9e8d7c6a5f4e31"
LEAD = Party("lead", "00000000-0000-4000-8000-000000000001")


def openai_settings(base_url: str, *extra: str) -> tuple[str, ...]:
    """The built-in OpenAI provider (OpenAI auth required, Codex's own retries) pointed at the scripted model."""
    return (f'openai_base_url="{base_url}"', 'model="mock-model"', 'approval_policy="never"',
            'sandbox_mode="read-only"', "features.plugins=false", "features.apps=false", *extra)


def api_key(secret: str, name: str = "default") -> Credential:
    return Credential(provider="codex", name=name, kind=CredentialKind.API_KEY, secret=secret)


@dataclass
class Agent:
    name: str
    spec: LaunchSpec
    script: AgentScript


@dataclass
class World:
    home: Home
    model: ScriptedModel
    provider: CodexProvider

    def agent(self, name: str, *settings: str, credentials: tuple[Credential, ...] = (),
              openai: bool = True) -> Agent:
        script = self.model.agent(name)
        agent_uuid = str(uuid.uuid4())
        workspace = self.home.root / "ws" / name
        workspace.mkdir(parents=True)
        base = openai_settings(script.base_url) if openai else tuple(
            codex_overrides(ScriptedProvider(base_url=script.base_url)))
        spec = LaunchSpec(
            name=name, uuid=agent_uuid, agent_dir=self.home.agent_dir(agent_uuid), workspace=workspace,
            mode="background", overrides=(*base, *settings), approve_tools=(), home=self.home, session="unused",
            thread_id=None, log_path=self.home.provider_log_path("codex", agent_uuid),
            pid_path=self.home.provider_pid_path("codex", agent_uuid), credentials=credentials)
        return Agent(name, spec, script)

    def run(self, agent: Agent, body: Callable[[CodexRuntime], Awaitable[Any]]) -> Any:
        """Prepare and run the agent's runtime, await `body` with it, stop it; `body`'s result."""
        return anyio.run(self._run, agent, body)

    async def _run(self, agent: Agent, body: Callable[[CodexRuntime], Awaitable[Any]]) -> Any:
        agent.spec.agent_dir.mkdir(parents=True, exist_ok=True)
        agent.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        agent.spec.pid_path.parent.mkdir(parents=True, exist_ok=True)
        runtime = await self.provider.prepare(agent.spec, await self.provider.probe())
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(runtime.run)
                try:
                    return await body(runtime)
                finally:
                    runtime.stop()
        except BaseExceptionGroup as group:
            raise _only(group) from None
        finally:
            runtime.events.close()  # the app's observer closes it; here the test is the reader


def _only(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv(ENV_CODEX, str(codex_or_skip()))
    monkeypatch.setenv("WARDIAN_SCRIPTED_MODEL_KEY", "dummy-key")
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    root = fresh_home("wsi")
    try:
        with ScriptedModel() as model:
            yield World(Home(root), model, CodexProvider())
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def one_turn(runtime: CodexRuntime, text: str = "hello") -> TurnOutcome:
    """Deliver one task and return its turn's outcome (bounded)."""
    started = await runtime.start_turn(TaskDelivery("ask_signin", LEAD, text))
    with anyio.fail_after(120):
        async for event in runtime.events:
            if isinstance(event, TurnOutcome) and event.turn_id == started.turn_id:
                return event
    raise AssertionError("the runtime ended before the turn did")


def interrupted_turns(codex_home: Path) -> set[str]:
    """The turns Codex recorded as interrupted (`turn_aborted`, reason `interrupted`) in the home's rollouts: a turn
    Codex failed by itself, after its retries, has none, so this proves the runtime ended it."""
    found: set[str] = set()
    for rollout in (codex_home / "sessions").rglob("*.jsonl"):
        for line in rollout.read_text(encoding="utf-8").splitlines():
            payload = json.loads(line).get("payload") or {}
            if payload.get("type") == "turn_aborted" and payload.get("reason") == "interrupted":
                found.add(str(payload.get("turn_id")))
    return found


def app_server_of(agent: Agent) -> psutil.Process:
    return psutil.Process(int(agent.spec.pid_path.read_text(encoding="utf-8")))


def test_the_key_reaches_the_model_as_the_exact_bearer_and_nowhere_on_disk_env_or_argv(world: World) -> None:
    agent = world.agent("lead", credentials=(api_key(KEY_WORK, "work"),))
    agent.script.require_key(KEY_WORK).add(Message("signed in and answering", phase="final_answer"))

    async def body(runtime: CodexRuntime) -> tuple[TurnOutcome, list[str], dict[str, str]]:
        process = app_server_of(agent)
        return await one_turn(runtime), process.cmdline(), process.environ()

    outcome, argv, env = world.run(agent, body)
    assert (outcome.status, outcome.final_text) == (OutcomeStatus.DONE, "signed in and answering")
    assert [r.carried(KEY_WORK) for r in agent.script.requests] == [True]
    assert not agent.script.unauthorized_requests
    assert KEY_WORK not in " ".join(argv)
    assert not [k for k, v in env.items() if KEY_WORK in v]
    config = (agent.spec.agent_dir / "codex" / "config.toml").read_text(encoding="utf-8")
    assert 'cli_auth_credentials_store = "ephemeral"' in config
    assert not (agent.spec.agent_dir / "codex" / "auth.json").exists()
    assert_secrets_absent([agent.spec.agent_dir, agent.spec.log_path], [], [KEY_WORK])


def test_two_agents_with_two_credentials_each_reach_the_model_with_their_own(world: World) -> None:
    work = world.agent("work", credentials=(api_key(KEY_WORK, "work"),))
    home = world.agent("home", credentials=(api_key(KEY_HOME, "home"),))
    work.script.require_key(KEY_WORK).add(Message("work answer", phase="final_answer"))
    home.script.require_key(KEY_HOME).add(Message("home answer", phase="final_answer"))
    results: dict[str, TurnOutcome] = {}

    async def collect(agent: Agent) -> None:
        results[agent.name] = await world._run(agent, one_turn)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, work)
            tg.start_soon(collect, home)

    anyio.run(main)
    assert {n: (o.status, o.final_text) for n, o in results.items()} == {
        "work": (OutcomeStatus.DONE, "work answer"), "home": (OutcomeStatus.DONE, "home answer")}
    assert [r.carried(KEY_WORK) for r in work.script.requests] == [True]
    assert [r.carried(KEY_HOME) for r in home.script.requests] == [True]
    assert_secrets_absent([work.spec.agent_dir, home.spec.agent_dir, world.home.log_dir], [], [KEY_WORK, KEY_HOME])


def refused(world: World, agent: Agent) -> errors.NotSignedIn:
    async def never(runtime: CodexRuntime) -> None:
        raise AssertionError("the runtime started although the agent is not signed in")

    with pytest.raises(errors.NotSignedIn) as caught:
        world.run(agent, never)
    assert not agent.spec.pid_path.exists()  # the app-server was stopped, its record gone
    assert agent.script.requests == []  # nothing was delivered, no thread sampled
    return caught.value


def test_an_agent_without_a_credential_is_refused_before_its_start(world: World) -> None:
    exc = refused(world, world.agent("lead"))
    assert exc.code == "not_signed_in"
    assert "Codex agent lead is not signed in" in exc.message
    assert "wardian auth login codex --with-api-key" in exc.message


def test_a_custom_provider_whose_env_key_variable_is_missing_is_refused_naming_it(world: World) -> None:
    agent = world.agent("lead", "model_providers.mock.env_key=\"WARDIAN_TEST_UNSET_KEY\"", openai=False)
    assert "WARDIAN_TEST_UNSET_KEY" not in os.environ
    exc = refused(world, agent)
    assert "WARDIAN_TEST_UNSET_KEY" in exc.message
    assert exc.details["variable"] == "WARDIAN_TEST_UNSET_KEY"


def test_a_blank_env_key_variable_counts_as_missing(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARDIAN_SCRIPTED_MODEL_KEY", "  ")
    exc = refused(world, world.agent("lead", openai=False))
    assert "WARDIAN_SCRIPTED_MODEL_KEY" in exc.message


def test_a_login_codex_refuses_is_not_signed_in_with_its_words_and_never_the_key(world: World) -> None:
    agent = world.agent("lead", 'forced_login_method="chatgpt"', credentials=(api_key(KEY_WORK, "work"),))
    exc = refused(world, agent)
    assert "could not be signed in with its API key (work, …8f60)" in exc.message
    assert "API key login is disabled" in exc.message
    assert KEY_WORK not in exc.message
    assert_secrets_absent([agent.spec.agent_dir, agent.spec.log_path], [], [KEY_WORK])


def test_a_rejected_key_ends_the_turn_at_the_first_401_not_after_codexs_retries(world: World) -> None:
    """Codex's built-in provider retries a 401 five times, with backoff, before it fails the turn; the runtime
    interrupts it at the first `error` notification instead."""
    agent = world.agent("lead", credentials=(api_key(KEY_HOME, "old"),))
    agent.script.require_key(KEY_WORK)
    outcome = world.run(agent, one_turn)
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.credentials_rejected
    assert outcome.error is not None
    assert "401" in outcome.error
    rejected = agent.script.unauthorized_requests
    assert rejected
    assert all(r.carried(KEY_HOME) for r in rejected)
    assert interrupted_turns(agent.spec.agent_dir / "codex") == {outcome.turn_id}  # ended by the runtime
    assert_secrets_absent([agent.spec.agent_dir, agent.spec.log_path], [repr(outcome)], [KEY_HOME])


def test_the_runtime_after_a_rejected_turn_still_serves_and_a_good_turn_is_not_marked(world: World) -> None:
    """Only the rejected turn is marked: a turn that completes later on the same runtime is an ordinary one."""
    agent = world.agent("lead", credentials=(api_key(KEY_WORK, "work"),))
    agent.script.require_key("sk-someone-else-000000000")

    async def body(runtime: CodexRuntime) -> tuple[TurnOutcome, TurnOutcome]:
        first = await one_turn(runtime)
        agent.script.require_key(KEY_WORK).add(Message("now it works", phase="final_answer"))
        return first, await one_turn(runtime, "again")

    first, second = world.run(agent, body)
    assert (first.status, first.credentials_rejected) == (OutcomeStatus.FAILED, True)
    assert (second.status, second.credentials_rejected, second.final_text) == (
        OutcomeStatus.DONE, False, "now it works")
