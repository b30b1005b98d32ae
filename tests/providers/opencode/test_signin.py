"""OpenCode agents' sign-in against the real `opencode serve` (docs/providers/opencode.md#sign-in): the agent's keys
reach the model, an agent without a key is refused before anything is delivered, a rejected key ends the turn with
the credentials marked rejected, and no key is left on disk, in a log or on a command line.

The provider is driven directly here (`OpenCodeProvider.prepare` with a `LaunchSpec` carrying credentials), on the
scripted model, which answers 401 unless a request carries the key the agent requires (`AgentScript.require_key`),
the way the real APIs do.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import psutil
import pytest

from tests.conftest import short_home
from tests.providers.opencode.conftest import opencode_or_skip
from wardian import errors
from wardian.auth.model import Credential, CredentialKind
from wardian.home import Home
from wardian.model import Party
from wardian.providers.base import LaunchSpec, OutcomeStatus, TaskDelivery, TurnOutcome
from wardian.providers.opencode.provider import OpenCodeProvider
from wardian.providers.opencode.runtime import OpenCodeRuntime
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.models.scripted_model import key_fingerprint as fp
from wardian_harness.providers.opencode_home import ScriptedOpenCode, opencode_overrides

KEY_A = "sk-oc-agent-a-7Qm2vX9pL4"
KEY_B = "sk-oc-agent-b-3Hn8wR5tK1"
WRONG = "sk-oc-wrong-0Zz0Zz0Zz0"
_uuids = itertools.count(1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class World:
    def __init__(self, root: Path, model: ScriptedModel) -> None:
        self.root = root
        self.home = Home(root)
        self.model = model
        self.specs: list[LaunchSpec] = []

    def base_url(self, name: str) -> str:
        return self.model.agent(name).base_url

    def requires(self, name: str, secret: str) -> None:
        self.model.agent(name).require_key(secret)

    def presented(self, name: str | None = None) -> list[tuple[str, str | None]]:
        """(agent, key fingerprint) of every model request, in order per agent."""
        return [(r.agent, r.key) for agent, script in sorted(self.model.agents.items()) if name in (None, agent)
                for r in script.requests]

    def spec(self, name: str, credentials: Sequence[Credential] = (), overrides: Sequence[str] | None = None,
             uuid: str | None = None) -> LaunchSpec:
        """A launch of agent `name` on the scripted model's chat dialect, with no key in its config, unless
        `overrides` replace those settings."""
        uuid = uuid or f"00000000-0000-4000-8000-{next(_uuids):012d}"
        if overrides is None:
            overrides = [o for o in opencode_overrides(ScriptedOpenCode(self.base_url(name)))
                         if ".apiKey=" not in o]
        agent_dir = self.home.agent_dir(uuid)
        agent_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        workspace = self.root / "ws" / name
        workspace.mkdir(parents=True, exist_ok=True)
        spec = LaunchSpec(name=name, uuid=uuid, agent_dir=agent_dir, workspace=workspace, mode="background",
                          overrides=tuple(overrides), approve_tools=(), home=self.home,
                          session="wardian-test-session-never-issued", thread_id=None,
                          log_path=self.root / f"{name}.log", pid_path=self.root / f"{name}.pid",
                          credentials=tuple(credentials))
        self.specs.append(spec)
        return spec


@pytest.fixture
def world() -> Iterator[World]:
    opencode_or_skip()
    root = short_home("os")
    try:
        with ScriptedModel() as model:
            yield World(root, model)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def key(name: str, provider_id: str, secret: str) -> Credential:
    return Credential("opencode", name, CredentialKind.API_KEY, secret, provider_id)


@asynccontextmanager
async def running(spec: LaunchSpec) -> AsyncIterator[OpenCodeRuntime]:
    provider = OpenCodeProvider()
    runtime = await provider.prepare(spec, await provider.probe())
    with runtime.events:
        try:
            async with anyio.create_task_group() as tg:
                with anyio.fail_after(240):
                    await tg.start(runtime.run)
                try:
                    yield runtime
                finally:
                    runtime.stop()
        except ExceptionGroup as group:
            while isinstance(group, ExceptionGroup) and len(group.exceptions) == 1:
                group = group.exceptions[0]  # the runtime's own failure, as the app's launcher reads it
            raise group from None


async def turn(runtime: OpenCodeRuntime, text: str) -> TurnOutcome:
    """One task through the runtime, and the outcome its loop ended with (bounded)."""
    started = await runtime.start_turn(TaskDelivery("ask_test", Party("lead", "lead-uuid"), text))
    with anyio.fail_after(120):
        async for event in runtime.events:
            if isinstance(event, TurnOutcome) and event.turn_id == started.turn_id:
                return event
    raise AssertionError("the runtime ended before the turn did")


def serve_pid(spec: LaunchSpec) -> int:
    return int(spec.pid_path.read_text().strip())


def files_holding(root: Path, secrets: Sequence[str]) -> list[str]:
    """Every file under `root` that holds one of `secrets`."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path}: {s[:8]}…" for s in secrets if s.encode() in data]
    return found


SERVE_ENVIRON = "/proc/$OPENCODE_PID/environ"
"""Where the agent's commands can still read serve's secrets: serve's own start-up environment, same user."""


@pytest.mark.anyio
@pytest.mark.timeout(300)  # two serve starts and four model requests: ~20 s alone, over 120 s at a load of 30
async def test_each_agent_reaches_its_model_with_its_own_key_which_no_file_and_none_of_its_commands_get(
        world: World) -> None:
    """Two agents, two named credentials: each request carries that agent's key; the key is in serve's environment
    only (not its argv, not the agent's private home, not the logs), and `/provider` answers 401 without the
    password. The `bash` tool's command runs with OpenCode's environment less the serve's secrets (wardian's
    `shell.env` plugin), while the agent's model still gets its key. serve's own `/proc/<pid>/environ` still holds
    both: a limit the docs state, pinned here by counting (never printing) them."""
    world.requires("a", KEY_A)
    world.requires("b", KEY_B)
    listing = "env; echo end-of-env"
    count = f"tr '\\0' '\\n' < {SERVE_ENVIRON} | grep -c -e '^OPENCODE_AUTH_CONTENT=' -e '^OPENCODE_SERVER_PASSWORD='"
    world.model.agent("a", ToolCall("bash", {"command": listing, "description": "d"}, namespace=None),
                      ToolCall("bash", {"command": count, "description": "d"}, namespace=None), Message("a done"))
    world.model.agent("b", Message("b done"))
    spec_a = world.spec("a", [key("work", "scripted", KEY_A)])
    spec_b = world.spec("b", [key("personal", "scripted", KEY_B)])
    async with running(spec_a) as a, running(spec_b) as b:
        assert (a.warnings, b.warnings) == ([], [])
        password = (spec_a.agent_dir / "opencode" / "server.password").read_text().strip()
        done_a, done_b = await turn(a, "hello a"), await turn(b, "hello b")
        for pid in (serve_pid(spec_a), serve_pid(spec_b)):
            assert not any(s in " ".join(psutil.Process(pid).cmdline()) for s in (KEY_A, KEY_B))
            port = next(c.laddr.port for c in psutil.Process(pid).net_connections("inet") if c.status == "LISTEN")
            assert httpx2.get(f"http://127.0.0.1:{port}/provider").status_code == 401
    assert (done_a.status, done_a.final_text) == (OutcomeStatus.DONE, "a done")
    assert (done_b.status, done_b.final_text) == (OutcomeStatus.DONE, "b done")
    # every request of a's loop carried a's key
    assert world.presented() == [("a", fp(KEY_A))] * 3 + [("b", fp(KEY_B))]
    env, counted = world.model.agents["a"].requests[-1].function_call_outputs()
    names = {line.split("=", 1)[0] for line in env.text.splitlines() if "=" in line}
    listed = "end-of-env" in env.text
    assert listed  # the command's whole environment:
    assert {"OPENCODE", "OPENCODE_PID", "XDG_CONFIG_HOME"} <= names
    assert not names & {"OPENCODE_AUTH_CONTENT", "OPENCODE_SERVER_PASSWORD"}
    leaked = [name for name, secret in (("key", KEY_A), ("password", password)) if secret in env.text]
    assert leaked == []  # compared here, so that a failure names the secret and never prints it
    assert counted.text.strip() == "2"
    assert files_holding(world.root, [KEY_A, KEY_B]) == []
    assert files_holding(world.root, [password]) == [f"{spec_a.agent_dir / 'opencode' / 'server.password'}: "
                                                     f"{password[:8]}…"]


@pytest.mark.anyio
async def test_an_agent_without_a_key_for_its_model_is_refused_before_anything_is_sent(world: World) -> None:
    """The model's provider is not in the agent's config and has no key (`/provider` does not list it connected):
    `not_signed_in` naming the command that fixes it (under the credential name the agent uses), no request, and no
    process left."""
    spec = world.spec("c", [key("work", "anthropic", KEY_A)], overrides=['model="openai/gpt-5"'])
    with pytest.raises(errors.NotSignedIn) as refused:
        async with running(spec):
            raise AssertionError("the start was not refused")
    assert refused.value.message == ("OpenCode agent c has no key for provider openai: run `wardian auth login "
                                     "opencode --provider openai --with-api-key --name work`")
    assert world.presented() == []
    assert not spec.pid_path.exists()
    assert not [p for p in psutil.process_iter(["environ"]) if (p.info["environ"] or {}).get("XDG_CONFIG_HOME")
                == str(spec.agent_dir / "opencode" / "config")]


@pytest.mark.anyio
async def test_a_rejected_key_ends_the_turn_with_the_credentials_rejected(world: World) -> None:
    """A wrong key: the model answers 401, OpenCode's `APIError` (statusCode 401, not retried) is a failed turn with
    `credentials_rejected`; one request only."""
    world.requires("d", KEY_A)
    world.model.agent("d", Message("never"))
    async with running(world.spec("d", [key("default", "scripted", WRONG)])) as runtime:
        outcome = await turn(runtime, "hello")
    assert (outcome.status, outcome.credentials_rejected) == (OutcomeStatus.FAILED, True)
    assert str(outcome.error).startswith("APIError: ")
    assert WRONG not in str(outcome.error)
    assert world.presented() == [("d", fp(WRONG))]
    assert len(world.model.agents["d"].unauthorized_requests) == 1


@pytest.mark.anyio
async def test_a_declared_provider_without_a_key_says_so_in_its_turn(world: World) -> None:
    """A provider the config declares (here the built-in openai, pointed at the model) is listed as connected with or
    without a key, so the start goes on; its turn fails with `ProviderAuthError` (no request sent), credentials
    rejected."""
    overrides = [f"provider.openai.options.baseURL={json.dumps(world.base_url('e'))}", 'model="openai/gpt-5"',
                 'small_model="openai/gpt-5"']
    async with running(world.spec("e", overrides=overrides)) as runtime:
        outcome = await turn(runtime, "hello")
    assert (outcome.status, outcome.credentials_rejected) == (OutcomeStatus.FAILED, True)
    assert str(outcome.error).startswith("ProviderAuthError: ")
    assert world.presented() == []


@pytest.mark.anyio
async def test_an_injected_openai_key_reaches_the_responses_api(world: World) -> None:
    """The built-in openai provider (Responses API) gets the injected key too, and the check passes for it."""
    world.requires("f", KEY_B)
    world.model.agent("f", Message("openai done"))
    overrides = [f"provider.openai.options.baseURL={json.dumps(world.base_url('f'))}", 'model="openai/gpt-5"',
                 'small_model="openai/gpt-5"']
    async with running(world.spec("f", [key("default", "openai", KEY_B)], overrides)) as runtime:
        outcome = await turn(runtime, "hello")
    assert (outcome.status, outcome.final_text) == (OutcomeStatus.DONE, "openai done")
    assert world.presented() == [("f", fp(KEY_B))]


@pytest.mark.anyio
async def test_a_config_api_key_that_overrides_the_credential_is_warned_about(world: World) -> None:
    """`provider.scripted.options.apiKey` in the agent's settings wins over the injected key (OpenCode's order): the
    start warns, naming the setting and the credential, never a key."""
    config_key = "sk-oc-config-5Tg6yH7uJ8"
    world.requires("g", config_key)
    world.model.agent("g", Message("config key used"))
    overrides = [*world.spec("g").overrides, f'provider.scripted.options.apiKey="{config_key}"']
    async with running(world.spec("g", [key("work", "scripted", KEY_A)], overrides)) as runtime:
        warnings = list(runtime.warnings)
        outcome = await turn(runtime, "hello")
    assert outcome.final_text == "config key used"
    assert world.presented() == [("g", fp(config_key))]
    assert warnings == ["OpenCode agent g: its opencode.json sets provider.scripted.options.apiKey, which OpenCode "
                        "uses instead of the key of credential 'work'; remove that setting (from the agent's -c "
                        "settings, or from its opencode.json) to use the credential"]
    log_text = (world.root / "g.log").read_text(errors="replace")
    assert [k for k in (KEY_A, config_key) if k in log_text] == []


@pytest.mark.anyio
async def test_copies_of_the_keys_a_put_auth_writes_are_removed_and_what_is_left_is_warned_about(
        world: World) -> None:
    """OpenCode writes the whole injected map into the agent's auth.json on any `PUT /auth` (here by a client holding
    the password, as the agent's own shell could): the copies of wardian's keys go when serve stops; the entry that
    is not wardian's stays, and the next start warns about it without showing it."""
    other = "sk-oc-other-9Ii8Uu7Yy6"
    spec = world.spec("h", [key("default", "scripted", KEY_A)])
    auth_file = spec.agent_dir / "opencode" / "data" / "opencode" / "auth.json"
    async with running(spec):
        pid = serve_pid(spec)
        port = next(c.laddr.port for c in psutil.Process(pid).net_connections("inet") if c.status == "LISTEN")
        password = (spec.agent_dir / "opencode" / "server.password").read_text().strip()
        basic = "Basic " + base64.b64encode(f"opencode:{password}".encode()).decode()
        put = httpx2.put(f"http://127.0.0.1:{port}/auth/other", json={"type": "api", "key": other},
                         headers={"Authorization": basic})
        assert put.status_code == 200
        assert KEY_A in auth_file.read_text()  # OpenCode persisted the injected map
    assert json.loads(auth_file.read_text()) == {"other": {"type": "api", "key": other}}
    # A copy a killed app could not remove (its serve never stopped cleanly) goes at the next start.
    auth_file.write_text(json.dumps({"scripted": {"type": "api", "key": KEY_A},
                                     "other": {"type": "api", "key": other}}))
    async with running(world.spec("h", [key("default", "scripted", KEY_A)], uuid=spec.uuid)) as again:
        warnings = list(again.warnings)
        assert json.loads(auth_file.read_text()) == {"other": {"type": "api", "key": other}}
    assert warnings == [f"OpenCode agent h: {auth_file} holds keys for other (OpenCode ignores it while wardian "
                              "gives the agent credentials, and uses it whenever the agent starts without any); "
                              "remove it and sign in with `wardian auth login opencode --provider ID "
                              "--with-api-key` instead"]
    assert files_holding(world.root, [KEY_A]) == []
