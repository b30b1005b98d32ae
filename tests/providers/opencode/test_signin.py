"""OpenCode agents' sign-in against the real `opencode serve` (docs/providers/opencode.md#sign-in): the agent's keys
reach the model, an agent without a key is refused before anything is delivered, a rejected key ends the turn with
the credentials marked rejected, and no key is left on disk, in a log or on a command line.

The provider is driven directly here (`OpenCodeProvider.prepare` with a `LaunchSpec` carrying credentials), on the
scripted model behind `KeyGate`: a loopback proxy that answers 401 unless a request carries the agent's own key, the
way the real APIs do.
"""

from __future__ import annotations

import base64
import http.client
import itertools
import json
import shutil
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

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
from wardian_harness.opencode_home import ScriptedOpenCode, opencode_overrides
from wardian_harness.scripted_model import Message, ScriptedModel, ToolCall

KEY_A = "sk-oc-agent-a-7Qm2vX9pL4"
KEY_B = "sk-oc-agent-b-3Hn8wR5tK1"
WRONG = "sk-oc-wrong-0Zz0Zz0Zz0"
_uuids = itertools.count(1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class KeyGate:
    """127.0.0.1 proxy to the scripted model: a request for agent NAME (`/agents/NAME/...`) is forwarded only when it
    carries `keys[NAME]` (Bearer, or x-api-key), else answered 401 as OpenAI does. `presented` records each key seen."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.keys: dict[str, str] = {}
        self.presented: list[tuple[str, str | None]] = []
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                gate._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def base_url(self, agent: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/agents/{agent}/v1"

    def __enter__(self) -> KeyGate:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = h.path.strip("/").split("/")
        agent = parts[1] if len(parts) > 1 else ""
        auth = h.headers.get("authorization") or ""
        key = auth[len("bearer "):] if auth.lower().startswith("bearer ") else h.headers.get("x-api-key")
        self.presented.append((agent, key))
        body = h.rfile.read(int(h.headers.get("content-length", "0")))
        h.close_connection = True
        if key != self.keys.get(agent):
            data = json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                         "code": "invalid_api_key"}}).encode()
            h.send_response(401)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            return
        upstream = http.client.HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=120)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "authorization", "content-length")}
        upstream.request("POST", h.path, body=body, headers=headers)
        response = upstream.getresponse()
        h.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                h.send_header(name, value)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        while chunk := response.read1(65536):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")
        upstream.close()


class World:
    def __init__(self, root: Path, model: ScriptedModel, gate: KeyGate) -> None:
        self.root = root
        self.home = Home(root)
        self.model = model
        self.gate = gate
        self.specs: list[LaunchSpec] = []

    def spec(self, name: str, credentials: Sequence[Credential] = (), overrides: Sequence[str] | None = None,
             uuid: str | None = None) -> LaunchSpec:
        """A launch of agent `name` on the scripted model's chat dialect through the gate, with no key in its config
        (the gate's: `self.gate.keys[name]`), unless `overrides` replace those settings."""
        uuid = uuid or f"00000000-0000-4000-8000-{next(_uuids):012d}"
        if overrides is None:
            overrides = [o for o in opencode_overrides(ScriptedOpenCode(self.gate.base_url(name)))
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
        with ScriptedModel() as model, KeyGate(model.url) as gate:
            yield World(root, model, gate)
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


@pytest.mark.anyio
async def test_each_agent_reaches_its_model_with_its_own_key_and_no_key_is_left_anywhere(world: World) -> None:
    """Two agents, two named credentials: each request carries that agent's key; the key is in serve's environment
    only (not its argv, not the agent's private home, not the logs), and `/provider` answers 401 without the
    password. OpenCode hands its environment to the agent's shell tool: pinned, since the docs say so."""
    world.gate.keys.update(a=KEY_A, b=KEY_B)
    world.model.agent("a", ToolCall("bash", {"command": "echo auth=${#OPENCODE_AUTH_CONTENT}", "description": "d"},
                                    namespace=None), Message("a done"))
    world.model.agent("b", Message("b done"))
    spec_a = world.spec("a", [key("work", "scripted", KEY_A)])
    spec_b = world.spec("b", [key("personal", "scripted", KEY_B)])
    async with running(spec_a) as a, running(spec_b) as b:
        assert (a.warnings, b.warnings) == ([], [])
        done_a, done_b = await turn(a, "hello a"), await turn(b, "hello b")
        for pid in (serve_pid(spec_a), serve_pid(spec_b)):
            assert not any(s in " ".join(psutil.Process(pid).cmdline()) for s in (KEY_A, KEY_B))
            port = next(c.laddr.port for c in psutil.Process(pid).net_connections("inet") if c.status == "LISTEN")
            assert httpx2.get(f"http://127.0.0.1:{port}/provider").status_code == 401
    assert (done_a.status, done_a.final_text) == (OutcomeStatus.DONE, "a done")
    assert (done_b.status, done_b.final_text) == (OutcomeStatus.DONE, "b done")
    assert {(agent, k) for agent, k in world.gate.presented} == {("a", KEY_A), ("b", KEY_B)}
    shell = world.model.agents["a"].requests[-1].function_call_outputs()
    assert [o.text.strip() for o in shell] == [f"auth={len(json.dumps({'scripted': {'type': 'api', 'key': KEY_A}}))}"]
    assert files_holding(world.root, [KEY_A, KEY_B]) == []


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
    assert world.gate.presented == []
    assert not spec.pid_path.exists()
    assert not [p for p in psutil.process_iter(["environ"]) if (p.info["environ"] or {}).get("XDG_CONFIG_HOME")
                == str(spec.agent_dir / "opencode" / "config")]


@pytest.mark.anyio
async def test_a_rejected_key_ends_the_turn_with_the_credentials_rejected(world: World) -> None:
    """A wrong key: the model answers 401, OpenCode's `APIError` (statusCode 401, not retried) is a failed turn with
    `credentials_rejected`; one request only."""
    world.gate.keys["d"] = KEY_A
    world.model.agent("d", Message("never"))
    async with running(world.spec("d", [key("default", "scripted", WRONG)])) as runtime:
        outcome = await turn(runtime, "hello")
    assert (outcome.status, outcome.credentials_rejected) == (OutcomeStatus.FAILED, True)
    assert str(outcome.error).startswith("APIError: ")
    assert WRONG not in str(outcome.error)
    assert world.gate.presented == [("d", WRONG)]


@pytest.mark.anyio
async def test_a_declared_provider_without_a_key_says_so_in_its_turn(world: World) -> None:
    """A provider the config declares (here the built-in openai, pointed at the model) is listed as connected with or
    without a key, so the start goes on; its turn fails with `ProviderAuthError` (no request sent), credentials
    rejected."""
    overrides = [f"provider.openai.options.baseURL={json.dumps(world.gate.base_url('e'))}", 'model="openai/gpt-5"',
                 'small_model="openai/gpt-5"']
    async with running(world.spec("e", overrides=overrides)) as runtime:
        outcome = await turn(runtime, "hello")
    assert (outcome.status, outcome.credentials_rejected) == (OutcomeStatus.FAILED, True)
    assert str(outcome.error).startswith("ProviderAuthError: ")
    assert world.gate.presented == []


@pytest.mark.anyio
async def test_an_injected_openai_key_reaches_the_responses_api(world: World) -> None:
    """The built-in openai provider (Responses API) gets the injected key too, and the check passes for it."""
    world.gate.keys["f"] = KEY_B
    world.model.agent("f", Message("openai done"))
    overrides = [f"provider.openai.options.baseURL={json.dumps(world.gate.base_url('f'))}", 'model="openai/gpt-5"',
                 'small_model="openai/gpt-5"']
    async with running(world.spec("f", [key("default", "openai", KEY_B)], overrides)) as runtime:
        outcome = await turn(runtime, "hello")
    assert (outcome.status, outcome.final_text) == (OutcomeStatus.DONE, "openai done")
    assert world.gate.presented == [("f", KEY_B)]


@pytest.mark.anyio
async def test_a_config_api_key_that_overrides_the_credential_is_warned_about(world: World) -> None:
    """`provider.scripted.options.apiKey` in the agent's settings wins over the injected key (OpenCode's order): the
    start warns, naming the setting and the credential, never a key."""
    config_key = "sk-oc-config-5Tg6yH7uJ8"
    world.gate.keys["g"] = config_key
    world.model.agent("g", Message("config key used"))
    overrides = [*world.spec("g").overrides, f'provider.scripted.options.apiKey="{config_key}"']
    async with running(world.spec("g", [key("work", "scripted", KEY_A)], overrides)) as runtime:
        warnings = list(runtime.warnings)
        outcome = await turn(runtime, "hello")
    assert outcome.final_text == "config key used"
    assert world.gate.presented == [("g", config_key)]
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
    async with running(world.spec("h", [key("default", "scripted", KEY_A)], uuid=spec.uuid)) as again:
        warnings = list(again.warnings)
    assert warnings == [f"OpenCode agent h: {auth_file} holds keys for other (OpenCode ignores it while wardian "
                              "gives the agent credentials, and uses it whenever the agent starts without any); "
                              "remove it and sign in with `wardian auth login opencode --provider ID "
                              "--with-api-key` instead"]
    assert files_holding(world.root, [KEY_A]) == []
