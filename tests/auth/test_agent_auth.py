"""An agent's credential reaches its starts: `auth` on `agent/add` and `agent/start` (kept with the agent), read
from the home's credential store at each start into `LaunchSpec.credentials`; a named credential that is not
stored refuses the add or the start before anything is saved or started. Through the app's real service and
provider-neutral runtime, with the test provider standing in for Codex, OpenCode and Claude Code."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.providers.fake_provider import FakeProvider
from wardian import errors
from wardian.app.runtime import Runtime
from wardian.app.service import AppService
from wardian.app.signals import MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.auth.model import Credential, CredentialKind
from wardian.auth.store import CredentialStore
from wardian.home import Home
from wardian.store import open_sqlite

pytestmark = [pytest.mark.fast, pytest.mark.usefixtures("file_backend")]

KEY = "sk-default-0123456789abcd"
WORK = "sk-work-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class App:
    service: AppService
    home: Home
    providers: dict[str, FakeProvider]
    credentials: CredentialStore

    async def call(self, method: str, **params: Any) -> Any:
        return await self.service.handle(method, params)

    def specs(self, provider: str = "codex") -> list[Any]:
        return [r.spec for r in self.providers[provider].runtimes]

    async def managed(self, name: str) -> dict[str, Any]:
        listed = await self.call("agent/list")
        uuid = next(a["uuid"] for a in listed["agents"] if a["name"] == name)
        return listed["managed"][uuid]


@asynccontextmanager
async def app() -> AsyncIterator[App]:
    root = Path(tempfile.mkdtemp(prefix="wau", dir="/tmp"))
    home = Home(root)
    (root / "logs").mkdir()
    (root / "run").mkdir(mode=0o700)
    store = open_sqlite(home.db_path)
    providers = {name: FakeProvider(name=name) for name in ("codex", "opencode", "claude")}
    try:
        writer = StoreWriter(store)
        signals = MailboxSignals()
        runtime = Runtime(home, writer, signals, providers=dict(providers))
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            await tg.start(runtime.run)
            yield App(AppService(home, writer, signals, tg.cancel_scope.cancel, runtime), home, providers,
                      CredentialStore(home))
            for handle in list(runtime.owners.values()):
                await runtime.stop_agent(handle.agent_id)
            writer.close()
            tg.cancel_scope.cancel()
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)


def codex(name: str = "default", secret: str = KEY) -> Credential:
    return Credential("codex", name, CredentialKind.API_KEY, secret)


@pytest.mark.anyio
async def test_each_start_reads_the_agents_credential_from_the_store() -> None:
    async with app() as a:
        await a.call("agent/add", name="lead", provider="codex")
        await a.call("agent/start", agent="lead")
        assert a.specs()[-1].credentials == (), "no default credential: the provider decides"
        a.credentials.put(codex())
        await a.call("agent/start", agent="lead")
        assert a.specs()[-1].credentials == (codex(),), "a login since the last start counts"
        assert (await a.managed("lead"))["auth"] is None


@pytest.mark.anyio
async def test_auth_at_add_and_at_start_is_kept_with_the_agent() -> None:
    async with app() as a:
        a.credentials.put(codex())
        a.credentials.put(codex("work", WORK))
        await a.call("agent/add", name="lead", provider="codex", auth="work")
        assert (await a.managed("lead"))["auth"] == "work"
        await a.call("agent/start", agent="lead")
        assert a.specs()[-1].credentials == (codex("work", WORK),)
        await a.call("agent/start", agent="lead", auth="default")  # back to the provider's default credential
        assert (await a.managed("lead"))["auth"] is None
        assert a.specs()[-1].credentials == (codex(),)
        await a.call("agent/start", agent="lead", auth="work")
        await a.call("agent/start", agent="lead")
        assert a.specs()[-1].credentials == (codex("work", WORK),), "a plain start keeps the chosen credential"


@pytest.mark.anyio
async def test_opencode_gets_every_provider_id_under_the_name() -> None:
    async with app() as a:
        for pid, secret in (("openai", KEY), ("anthropic", WORK)):
            a.credentials.put(Credential("opencode", "team", CredentialKind.API_KEY, secret, pid))
        a.credentials.put(codex("team"))
        await a.call("agent/add", name="oc", provider="opencode", auth="team")
        await a.call("agent/start", agent="oc")
        assert [(c.provider, c.provider_id, c.secret) for c in a.specs("opencode")[-1].credentials] == [
            ("opencode", "anthropic", WORK), ("opencode", "openai", KEY)]


@pytest.mark.anyio
async def test_claude_code_gets_its_token() -> None:
    async with app() as a:
        token = Credential("claude", "default", CredentialKind.OAUTH_TOKEN, "sk-ant-oat01-0123456789abcdef")
        a.credentials.put(token)
        a.credentials.put(codex())
        await a.call("agent/add", name="cc", provider="claude")
        await a.call("agent/start", agent="cc")
        assert a.specs("claude")[-1].credentials == (token,), "only its own provider's credential"


@pytest.mark.anyio
async def test_an_unknown_credential_name_changes_nothing() -> None:
    async with app() as a:
        a.credentials.put(codex("work", WORK))
        with pytest.raises(errors.NotSignedIn) as info:
            await a.call("agent/add", name="lead", provider="codex", auth="nope")
        assert "wardian auth login codex --with-api-key --name nope" in info.value.message
        assert info.value.field == "auth"
        assert (await a.call("agent/list"))["agents"] == [], "the agent was not added"
        with pytest.raises(errors.NotSignedIn):  # a name of another provider's credential is not this one's
            await a.call("agent/add", name="oc", provider="opencode", auth="work")
        await a.call("agent/add", name="lead", provider="codex", auth="work")
        await a.call("agent/start", agent="lead")
        with pytest.raises(errors.NotSignedIn, match="nope"):
            await a.call("agent/start", agent="lead", auth="nope")
        assert (await a.managed("lead"))["auth"] == "work"
        assert len(a.specs()) == 1, "nothing was restarted"
        for bad in ("Work", "", "a b", "-x"):
            with pytest.raises(errors.InvalidArguments) as bad_info:
                await a.call("agent/start", agent="lead", auth=bad)
            assert (bad_info.value.field, len(a.specs())) == ("auth", 1)


@pytest.mark.anyio
async def test_a_start_whose_credential_was_removed_is_refused_before_anything_runs() -> None:
    async with app() as a:
        a.credentials.put(codex("work", WORK))
        await a.call("agent/add", name="lead", provider="codex", auth="work")
        await a.call("agent/start", agent="lead")
        await a.call("agent/stop", agent="lead")
        generation = (await a.call("agent/list"))["agents"][0]["generation"]
        assert a.credentials.remove("codex", "work") == 1
        with pytest.raises(errors.NotSignedIn) as info:
            await a.call("agent/start", agent="lead")
        assert "wardian auth login codex --with-api-key --name work" in info.value.message
        assert len(a.specs()) == 1, "the provider was never asked to prepare a runtime"
        assert (await a.call("agent/list"))["agents"][0]["generation"] == generation
        assert (await a.call("agent/list"))["agents"][0]["status"] == "signed_out"  # not errored: only its sign-in
        a.credentials.put(codex("work", KEY))
        await a.call("agent/start", agent="lead")
        assert (await a.call("agent/list"))["agents"][0]["status"] == "idle"
        assert a.specs()[-1].credentials == (codex("work", KEY),)
